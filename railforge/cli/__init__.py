"""The `railforge` command's shell: the typer app and its build command (`main`), the entry point (`entry`),
argument checks (`args`), safe printing (`show`), progress and timings (`progress`), the parallel renderer
(`parallel`), the growth note (`growth`) and the build's malloc settings (`malloc`). Each tool's own commands live
in its package (`railforge/<tool>/cli.py`) and are added to the app here."""
