"""The files envpin is given and the files it writes: `read` (bounded reads of regular files only, user files
read with one clear error, JSON parsed with limits, content hashes) and `write` (atomic writes, folder swaps,
the writers' advisory lock, checks of output paths before any work is done).

Texts raised from here name no command-line option and no command: a parameter the caller named is spelled
through `envpin.errors.param`, which the CLI renders as its option."""
