complete --keep-order --exclusive --command h9sandbox --arguments "(H9SANDBOX_COMPLETE=fish h9sandbox -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
