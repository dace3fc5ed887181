//! The agent's answer to [`super::proto::Request::Stats`]: one sample of the sandbox's resource
//! use, read inside the container (so it works wherever the sandbox runs) from its cgroup, v1 or
//! v2 (`cgroups(7)`, the kernel's `cgroup-v1/*.txt` and `cgroup-v2.rst`), from
//! `/proc/net/dev` (its network namespace) and from the file system.
//!
//! - cgroup v2 (one hierarchy; the container's cgroup is the root of its cgroup namespace, or
//!   the path `/proc/self/cgroup` names): `cpu.stat` (`usage_usec`), `cpu.max`, `memory.current`,
//!   `memory.stat` (`inactive_file`), `memory.max`, `memory.peak` (Linux 5.19), `pids.current`,
//!   `pids.max`;
//! - cgroup v1 (a hierarchy per controller; the engine mounts the container's own directory of
//!   each at `/sys/fs/cgroup/<controller>`): `cpuacct.usage`, `cpu.cfs_quota_us` /
//!   `cpu.cfs_period_us`, `memory.usage_in_bytes`, `memory.stat` (`total_inactive_file`),
//!   `memory.limit_in_bytes`, `memory.max_usage_in_bytes`, `pids.current`, `pids.max`.
//!
//! Memory in use is counted as `docker stats` counts it: the usage less the inactive file
//! cache, which the kernel reclaims first. Everything is parsed as untrusted text (a sandbox's
//! root cannot write these files, but a value that does not parse is `None`, never a panic).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::proto::{DiskUse, Stats, StatsRequest};

/// Where the cgroup file systems are mounted in a container.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Most entries one directory's walk counts before it stops ([`DiskUse::complete`] false).
pub(crate) const DISK_WALK_MAX_ENTRIES: u64 = 200_000;
/// Longest one directory's walk goes on.
pub(crate) const DISK_WALK_MAX_TIME: Duration = Duration::from_secs(2);
/// How long a directory's disk use is taken from the last walk rather than walked again (a
/// `stats` stream asks every second).
pub(crate) const DISK_CACHE: Duration = Duration::from_secs(5);

/// Takes one sample: the cgroup's counters (whichever version the container has), the network
/// bytes, and the disk use of each directory `req` names.
pub(crate) fn sample(req: &StatsRequest) -> Stats {
    let mut s = Stats {
        at_ns: monotonic_ns(),
        ..Stats::default()
    };
    match cgroup_v2_dir(Path::new(CGROUP_ROOT), &read("/proc/self/cgroup")) {
        Some(dir) => {
            s.cgroup = 2;
            read_v2(&dir, &mut s);
        }
        None if Path::new(CGROUP_ROOT).join("memory").is_dir()
            || Path::new(CGROUP_ROOT).join("cpuacct").is_dir() =>
        {
            s.cgroup = 1;
            read_v1(Path::new(CGROUP_ROOT), &mut s);
        }
        None => {}
    }
    if let Some((rx, tx)) = net_bytes(&read("/proc/net/dev")) {
        s.net_rx = Some(rx);
        s.net_tx = Some(tx);
    }
    s.disk = req.disk.iter().map(|d| disk_use_cached(d)).collect();
    s
}

/// The container's process limit (`pids.max` of its cgroup, v2 or v1), when it has one.
pub(crate) fn pids_limit() -> Option<u64> {
    match cgroup_v2_dir(Path::new(CGROUP_ROOT), &read("/proc/self/cgroup")) {
        Some(dir) => max_value(&read(dir.join("pids.max"))),
        None => max_value(&read(Path::new(CGROUP_ROOT).join("pids/pids.max"))),
    }
}

/// Why a process could not be made, when `e` is the kernel's `EAGAIN` of fork(2) or clone(2) at
/// the container's process limit: the limit, and what to do; `None` for any other error.
pub(crate) fn at_process_limit(e: &std::io::Error) -> Option<String> {
    if e.raw_os_error() != Some(libc::EAGAIN) {
        return None;
    }
    let limit = pids_limit().map_or(String::new(), |n| format!(" ({n})"));
    Some(format!(
        "the sandbox runs as many processes as its limit allows{limit}: end some (`h9sandbox ps ID` lists the detached commands, `h9sandbox kill ID HANDLE` ends one, which needs no new process; `h9sandbox down ID` ends all), or make the sandbox with a higher --pids-limit"
    ))
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read(path).trim().parse().ok()
}

/// `CLOCK_MONOTONIC`, nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    // CLOCK_MONOTONIC never goes below zero.
    let (secs, nanos) = (
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u64::try_from(ts.tv_nsec).unwrap_or(0),
    );
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// The directory of this process's cgroup v2 under `root`, when `root` is a v2 hierarchy
/// (`cgroup.controllers` there): the path of `/proc/self/cgroup`'s `0::` line (`/` in a cgroup
/// namespace of its own, as Docker and Podman give on v2), else `root` itself.
pub(crate) fn cgroup_v2_dir(root: &Path, proc_self_cgroup: &str) -> Option<PathBuf> {
    if !root.join("cgroup.controllers").is_file() {
        return None;
    }
    let own = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/'))
        .filter(|p| !p.is_empty() && !p.split('/').any(|c| c == ".."))
        .map(|p| root.join(p))
        .filter(|d| d.is_dir());
    Some(own.unwrap_or_else(|| root.to_path_buf()))
}

fn read_v2(dir: &Path, s: &mut Stats) {
    let f = |name: &str| read(dir.join(name));
    s.cpu_ns = v2_cpu_usage_ns(&f("cpu.stat"));
    s.cpu_limit_milli = v2_cpu_limit_milli(&f("cpu.max"));
    let current = f("memory.current").trim().parse::<u64>().ok();
    s.memory = current.map(|c| memory_in_use(c, stat_value(&f("memory.stat"), "inactive_file")));
    s.memory_limit = max_value(&f("memory.max"));
    s.memory_peak = f("memory.peak").trim().parse().ok();
    s.pids = f("pids.current").trim().parse().ok();
    s.pids_limit = max_value(&f("pids.max"));
}

fn read_v1(root: &Path, s: &mut Stats) {
    let cpu = root.join("cpu");
    let acct = root.join("cpuacct");
    let mem = root.join("memory");
    let pids = root.join("pids");
    s.cpu_ns = read_u64(acct.join("cpuacct.usage"));
    s.cpu_limit_milli = v1_cpu_limit_milli(
        &read(cpu.join("cpu.cfs_quota_us")),
        &read(cpu.join("cpu.cfs_period_us")),
    );
    s.memory = read_u64(mem.join("memory.usage_in_bytes")).map(|u| {
        memory_in_use(
            u,
            stat_value(&read(mem.join("memory.stat")), "total_inactive_file"),
        )
    });
    s.memory_limit = read_u64(mem.join("memory.limit_in_bytes")).filter(|b| *b < V1_NO_LIMIT);
    s.memory_peak = read_u64(mem.join("memory.max_usage_in_bytes"));
    s.pids = read_u64(pids.join("pids.current"));
    s.pids_limit = max_value(&read(pids.join("pids.max")));
}

/// cgroup v1 says "no memory limit" with a huge number (`PAGE_COUNTER_MAX` pages, about 2^63
/// bytes); anything from 2^62 on is taken for it.
const V1_NO_LIMIT: u64 = 1 << 62;

/// `usage − inactive_file` (what `docker stats` shows), never below zero.
pub(crate) fn memory_in_use(usage: u64, inactive_file: Option<u64>) -> u64 {
    usage.saturating_sub(inactive_file.unwrap_or(0))
}

/// The value of `key` in a flat-keyed file (`memory.stat`, `cpu.stat`: `KEY VALUE` lines).
pub(crate) fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A v2 limit file (`memory.max`, `pids.max`; v1's `pids.max` too): a number, or `max` for
/// none (`None`, as for anything that does not parse).
pub(crate) fn max_value(text: &str) -> Option<u64> {
    match text.trim() {
        "max" | "" => None,
        n => n.parse().ok(),
    }
}

/// v2 `cpu.stat`'s `usage_usec`, in nanoseconds.
pub(crate) fn v2_cpu_usage_ns(cpu_stat: &str) -> Option<u64> {
    stat_value(cpu_stat, "usage_usec").map(|us| us.saturating_mul(1000))
}

/// v2 `cpu.max` (`QUOTA PERIOD`, microseconds, or `max PERIOD`) as thousandths of a core;
/// `None` without a limit.
pub(crate) fn v2_cpu_limit_milli(cpu_max: &str) -> Option<u64> {
    let mut it = cpu_max.split_whitespace();
    let quota = it.next()?.parse::<u64>().ok()?;
    let period = it.next()?.parse::<u64>().ok().filter(|p| *p > 0)?;
    Some(quota.saturating_mul(1000) / period)
}

/// v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` as thousandths of a core; `None` without a
/// limit (a quota of -1).
pub(crate) fn v1_cpu_limit_milli(quota: &str, period: &str) -> Option<u64> {
    let quota = quota
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(|q| u64::try_from(q).ok())
        .filter(|q| *q > 0)?;
    let period = period.trim().parse::<u64>().ok().filter(|p| *p > 0)?;
    Some(quota.saturating_mul(1000) / period)
}

/// Bytes received and sent on every interface of `/proc/net/dev` but loopback.
pub(crate) fn net_bytes(proc_net_dev: &str) -> Option<(u64, u64)> {
    let mut any = false;
    let (mut rx, mut tx) = (0u64, 0u64);
    for line in proc_net_dev.lines() {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == "lo" {
            any = true;
            continue;
        }
        let f: Vec<u64> = counters
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if f.len() >= 9 {
            any = true;
            rx = rx.saturating_add(f[0]);
            tx = tx.saturating_add(f[8]);
        }
    }
    any.then_some((rx, tx))
}

/// The last walk of each directory, for [`DISK_CACHE`].
static DISK_SEEN: Mutex<Option<HashMap<String, (Instant, DiskUse)>>> = Mutex::new(None);

fn disk_use_cached(dir: &str) -> DiskUse {
    let now = Instant::now();
    {
        let seen = DISK_SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, d)) = seen.as_ref().and_then(|m| m.get(dir)) {
            if now.duration_since(*at) < DISK_CACHE {
                return *d;
            }
        }
    }
    let d = disk_use(Path::new(dir), DISK_WALK_MAX_ENTRIES, DISK_WALK_MAX_TIME);
    let mut seen = DISK_SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.get_or_insert_with(HashMap::new)
        .insert(dir.to_string(), (now, d));
    d
}

/// The disk `dir`'s tree takes: allocated blocks of every entry on `dir`'s own file system
/// (mounts inside are not entered, symlinks not followed, hard links counted once), at most
/// `max_entries` entries and `max_time` long.
pub(crate) fn disk_use(dir: &Path, max_entries: u64, max_time: Duration) -> DiskUse {
    let start = Instant::now();
    let mut out = DiskUse {
        complete: true,
        ..DiskUse::default()
    };
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        out.complete = false;
        return out;
    };
    let dev = top.dev();
    let mut links: std::collections::HashSet<u64> = Default::default();
    let mut count = |m: &std::fs::Metadata, out: &mut DiskUse| {
        out.entries += 1;
        if m.nlink() > 1 && !m.is_dir() && !links.insert(m.ino()) {
            return;
        }
        out.bytes = out.bytes.saturating_add(m.blocks().saturating_mul(512));
    };
    count(&top, &mut out);
    if !top.is_dir() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            out.complete = false;
            continue;
        };
        for e in rd.flatten() {
            if out.entries >= max_entries || start.elapsed() >= max_time {
                out.complete = false;
                return out;
            }
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            count(&m, &mut out);
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // cpu.stat as cgroup v2 prints it: read from this machine's v2 hierarchy (Linux 6.18, a
    // cgroup without the cpu controller: the core's four lines), and from a Docker container's
    // cgroup on a v2 host with the cpu controller (Debian 12, Linux 6.1).
    const CPU_STAT_CORE: &str =
        "usage_usec 8288313750\nuser_usec 6303576206\nsystem_usec 1984737543\nnice_usec 4760257299\n";
    const CPU_STAT_CONTROLLER: &str = "usage_usec 2140963\nuser_usec 1593428\nsystem_usec 547535\n\
nr_periods 118\nnr_throttled 31\nthrottled_usec 1859241\nnr_bursts 0\nburst_usec 0\n";
    // memory.stat of the same container (its first lines are what the parser needs; the file
    // goes on with workingset_*, pg* and thp_* counters).
    const MEMORY_STAT: &str = "anon 2621440\nfile 15216640\nkernel 1155072\nkernel_stack 65536\n\
pagetables 98304\nsec_pagetables 0\npercpu 2592\nsock 0\nvmalloc 8192\nshmem 0\nzswap 0\n\
zswapped 0\nfile_mapped 6307840\nfile_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\n\
file_thp 0\nshmem_thp 0\ninactive_anon 2596864\nactive_anon 24576\ninactive_file 9682944\n\
active_file 5533696\nunevictable 0\nslab_reclaimable 651576\nslab_unreclaimable 301256\n\
slab 952832\nworkingset_refault_anon 0\nworkingset_refault_file 0\npgfault 5619\n\
pgmajfault 104\nthp_fault_alloc 0\nthp_collapse_alloc 0\n";

    #[test]
    fn cgroup_v2_cpu() {
        assert_eq!(v2_cpu_usage_ns(CPU_STAT_CORE), Some(8_288_313_750_000));
        assert_eq!(v2_cpu_usage_ns(CPU_STAT_CONTROLLER), Some(2_140_963_000));
        // --cpus 0.5 (Docker writes a period of 100 ms), 1.5, and none.
        assert_eq!(v2_cpu_limit_milli("50000 100000\n"), Some(500));
        assert_eq!(v2_cpu_limit_milli("150000 100000\n"), Some(1500));
        assert_eq!(v2_cpu_limit_milli("max 100000\n"), None);
        assert_eq!(v2_cpu_limit_milli("garbage"), None);
        assert_eq!(v2_cpu_limit_milli("50000 0"), None);
    }

    #[test]
    fn cgroup_v2_memory_and_pids() {
        // memory.current of that container, less its inactive file cache.
        let inactive = stat_value(MEMORY_STAT, "inactive_file");
        assert_eq!(inactive, Some(9_682_944));
        assert_eq!(memory_in_use(19_013_632, inactive), 9_330_688);
        assert_eq!(memory_in_use(1, inactive), 0);
        // `anon` is a key, `inactive_anon` another: whole keys only.
        assert_eq!(stat_value(MEMORY_STAT, "anon"), Some(2_621_440));
        assert_eq!(stat_value(MEMORY_STAT, "nonesuch"), None);
        // memory.max with --memory 512m, and without a limit; pids.max likewise.
        assert_eq!(max_value("536870912\n"), Some(536_870_912));
        assert_eq!(max_value("max\n"), None);
        assert_eq!(max_value("256\n"), Some(256));
        assert_eq!(max_value("-1\n"), None);
    }

    #[test]
    fn cgroup_v2_directory() {
        let d = tempfile::tempdir().unwrap();
        // Not a v2 hierarchy (no cgroup.controllers): none.
        assert_eq!(cgroup_v2_dir(d.path(), "0::/\n"), None);
        std::fs::write(
            d.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        // A cgroup namespace of its own: the root.
        assert_eq!(cgroup_v2_dir(d.path(), "0::/\n").unwrap(), d.path());
        // The host's namespace: the path named, when it is there; `..` never leads out.
        std::fs::create_dir_all(d.path().join("system.slice/docker-1.scope")).unwrap();
        assert_eq!(
            cgroup_v2_dir(d.path(), "0::/system.slice/docker-1.scope\n").unwrap(),
            d.path().join("system.slice/docker-1.scope")
        );
        assert_eq!(cgroup_v2_dir(d.path(), "0::/../etc\n").unwrap(), d.path());
        assert_eq!(cgroup_v2_dir(d.path(), "0::/gone\n").unwrap(), d.path());
    }

    #[test]
    fn cgroup_v1_cpu_limit() {
        assert_eq!(v1_cpu_limit_milli("50000\n", "100000\n"), Some(500));
        assert_eq!(v1_cpu_limit_milli("-1\n", "100000\n"), None);
        assert_eq!(v1_cpu_limit_milli("", ""), None);
    }

    #[test]
    fn network_bytes_leave_loopback_out() {
        let dev = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    5120      64    0    0    0     0          0         0     5120      64    0    0    0     0       0          0
  eth0: 1048576    800    0    0    0     0          0         0    20480     150    0    0    0     0       0          0
";
        assert_eq!(net_bytes(dev), Some((1_048_576, 20_480)));
        // network none: loopback only.
        let none = "Inter-|\n face |\n    lo:  0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(net_bytes(none), Some((0, 0)));
        assert_eq!(net_bytes(""), None);
    }

    #[test]
    fn disk_use_stays_on_its_file_system_and_counts_links_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), vec![7u8; 64 << 10]).unwrap();
        std::fs::hard_link(d.path().join("a"), d.path().join("b")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/usr", d.path().join("sub/out")).unwrap();
        let u = disk_use(d.path(), 1000, Duration::from_secs(5));
        assert!(u.complete);
        assert_eq!(u.entries, 5);
        assert!(u.bytes >= 64 << 10 && u.bytes < 200 << 10, "{u:?}");
        // The bound stops the walk and says so.
        let u = disk_use(d.path(), 2, Duration::from_secs(5));
        assert!(!u.complete);
        assert!(!disk_use(&d.path().join("missing"), 10, Duration::from_secs(1)).complete);
    }
}
