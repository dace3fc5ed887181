//! Which derived image (the sandbox's image plus h9sandbox's agent,
//! [`crate::engine::Environment::agent_image`]) an image got last time on each daemon, so that
//! `up` through a daemon's client asks for the image's ID and that derived image in one client
//! process instead of two in a row. Only a hint: the engine checks it against the image's ID
//! now, so a stale, missing or edited entry costs the full lookup, never a wrong image.
//!
//! Kept in the state directory's `agent-images.json` (written atomically under the state lock,
//! like `trust.json`): `{"version": 1, "images": [{"target", "image", "tag"}]}`, newest last,
//! at most [`MAX_ENTRIES`].

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Ctx, Target};

/// The state directory's file of the cache.
pub(crate) const FILE: &str = "agent-images.json";

/// The most entries kept (the oldest are dropped first).
pub(crate) const MAX_ENTRIES: usize = 64;

const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Cache {
    version: u32,
    images: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    /// Where the image is: [`Target`]'s text (`docker at tcp://…`).
    target: String,
    /// The image as `up` names it.
    image: String,
    /// Its derived image's name.
    tag: String,
}

fn parse(bytes: Option<&[u8]>) -> Cache {
    // A file that does not parse (or a newer one) is no hint: the full lookup follows.
    bytes
        .and_then(|b| serde_json::from_slice::<Cache>(b).ok())
        .filter(|c| c.version <= VERSION)
        .unwrap_or_default()
}

/// The derived image `image` on `target` got last time, if the cache has one.
pub(crate) fn hint(ctx: &Ctx, target: &Target, image: &str) -> Option<String> {
    let bytes = ctx.store.read_document(FILE).ok()??;
    let key = target.to_string();
    parse(Some(&bytes))
        .images
        .into_iter()
        .rev()
        .find(|e| e.target == key && e.image == image)
        .map(|e| e.tag)
}

/// Records that `image` on `target` has the derived image `tag` (nothing is written when the
/// cache says so already). Errors: the state directory's.
pub(crate) fn remember(ctx: &Ctx, target: &Target, image: &str, tag: &str) -> Result<()> {
    let key = target.to_string();
    ctx.store.update_document(FILE, |bytes| {
        let mut cache = parse(bytes.as_deref());
        if cache
            .images
            .iter()
            .any(|e| e.target == key && e.image == image && e.tag == tag)
        {
            return Ok((None, ()));
        }
        cache
            .images
            .retain(|e| !(e.target == key && e.image == image));
        cache.images.push(Entry {
            target: key,
            image: image.to_string(),
            tag: tag.to_string(),
        });
        let excess = cache.images.len().saturating_sub(MAX_ENTRIES);
        cache.images.drain(..excess);
        cache.version = VERSION;
        let mut json = serde_json::to_vec_pretty(&cache).expect("the cache serializes");
        json.push(b'\n');
        Ok((Some(json), ()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_per_daemon_and_image_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "engine = \"local\"\nstate_dir = {:?}\n",
                dir.path().join("state").to_str().unwrap()
            ),
        )
        .unwrap();
        let layers = crate::config::Layers::load_with_env(Some(&config), |_| None).unwrap();
        let ctx =
            Ctx::from_layers(&layers, &[], std::sync::Arc::new(crate::report::Silent)).unwrap();
        let here = ctx.current_target();
        assert_eq!(hint(&ctx, &here, "img:1"), None);
        remember(
            &ctx,
            &here,
            "img:1",
            "h9sandbox-agent:aaaaaaaaaaaa-bbbbbbbbbbbb",
        )
        .unwrap();
        remember(
            &ctx,
            &here,
            "img:2",
            "h9sandbox-agent:cccccccccccc-bbbbbbbbbbbb",
        )
        .unwrap();
        remember(
            &ctx,
            &here,
            "img:1",
            "h9sandbox-agent:dddddddddddd-bbbbbbbbbbbb",
        )
        .unwrap();
        assert_eq!(
            hint(&ctx, &here, "img:1").as_deref(),
            Some("h9sandbox-agent:dddddddddddd-bbbbbbbbbbbb")
        );
        for i in 0..MAX_ENTRIES + 5 {
            remember(&ctx, &here, &format!("many:{i}"), "t").unwrap();
        }
        let cache = parse(ctx.store.read_document(FILE).unwrap().as_deref());
        assert_eq!(cache.images.len(), MAX_ENTRIES);
        assert_eq!(hint(&ctx, &here, "img:1"), None, "the oldest went first");
        // A file that does not parse is no hint, and the next write replaces it.
        std::fs::write(ctx.store.dir().join(FILE), b"{not json").unwrap();
        assert_eq!(hint(&ctx, &here, "many:70"), None);
        remember(&ctx, &here, "img:3", "t3").unwrap();
        assert_eq!(hint(&ctx, &here, "img:3").as_deref(), Some("t3"));
    }
}
