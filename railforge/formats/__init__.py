"""How railforge writes files: the atomic staged output of a build (`output`) and the writers of the file
formats several families share (`xlsx` workbooks, `csvrows` spreadsheet-safe CSV, `yamlout` YAML)."""
