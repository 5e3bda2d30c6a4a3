"""What the entry points (`gear_trl.train`, `gear_trl.evaluate`, `gear_trl.inspect_credit`, `gear_trl.table`) share
with the task plug-ins below them: the user-input error type (`errors`), loading a user's reward, environment or
dataset adapter by import path (`plugins`) and the command-line flag style (`flags`). Nothing here imports the rest
of gear_trl.
"""
