
set edit:completion:arg-completer[h9sandbox] = { |@words|
    var index = (count $words)
    set index = (- $index 1)

    put (env _CLAP_IFS="\n" _CLAP_COMPLETE_INDEX=(to-string $index) H9SANDBOX_COMPLETE="elvish" h9sandbox -- $@words) | to-lines
}

