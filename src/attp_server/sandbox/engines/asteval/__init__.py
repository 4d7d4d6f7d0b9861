"""The asteval engine (``engine = "asteval"``): asteval's own `Interpreter`, in the worker, under the same contract.

Owns: `engine` (the worker's side: the symbol table a run gets, asteval's `Interpreter` with the few hooks the
contract needs, one run), `failures` (asteval's list of errors turned into the exception the worker maps to an
error code and a line), `language` (what the model reads about the language).
Runs in the worker (`language`: also in the server). May import: the rest of `attp_server.sandbox` only.
"""
