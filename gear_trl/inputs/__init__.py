"""What the entry points (`gear_trl.train`, `gear_trl.evaluate`, `gear_trl.inspect_credit`, `gear_trl.table`) share
with the task plug-ins below them: the user-input error type (`errors`), loading a user's reward, environment or
dataset adapter by import path (`plugins`), the command-line flag style (`flags`), paths (`paths`) and a run's
inputs checked before its model loads (`preflight`, used by training and evaluation alike). Nothing here imports the
rest of gear_trl. (`gear_trl.cli`, this package's old name, is deprecation shims.)
"""
