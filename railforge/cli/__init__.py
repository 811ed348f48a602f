"""The `railforge` command's shell: the typer app, its lazily loaded subcommands and plain help (`main`), the
work's own commands init/validate/build (`build`), the entry point (`entry`), argument checks (`args`), safe
printing (`show`), progress and timings (`progress`), the parallel renderer (`parallel`), the growth note
(`growth`) and the build's malloc settings (`malloc`). Each tool's own commands live in its package
(`railforge/<tool>/cli.py`); `main.COMMANDS` names them, and one is imported only when it runs."""
