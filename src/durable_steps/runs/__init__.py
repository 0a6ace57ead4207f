"""The client side of a run: what a caller uses to reach a run from outside -- start
it, await it, cancel it, talk to it, read its history. It imports the engine
(``runner``); the engine never imports it."""
