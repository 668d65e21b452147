"""What tune_kernel prints, as Kernel Tuner prints it: the device, the space's size, a line per
setting (knobs, time, metrics), the best; a progress line only on a terminal; nothing when quiet;
the failures' reasons when verbose. cltune adds one line when settings computed wrong answers."""

from __future__ import annotations

import sys

from .util import get_config_string


def config_string(result: dict, keys) -> str:
    """knob=value, ... for `keys` present in `result` (floats to 3 decimals, time in ms)."""
    return get_config_string(result, list(keys), {"time": "ms"})


class Printer:
    """Prints as results come (search rows), counting the rows the sweep will write for the bar."""

    def __init__(self, quiet: bool, verbose: bool, keys: list, stream=None):
        self.quiet, self.verbose, self.keys = quiet, verbose, keys
        self.out = stream or sys.stdout
        self.tty = not quiet and hasattr(self.out, "isatty") and self.out.isatty()
        self.total, self.done, self._bar = 0, 0, False

    def say(self, text: str) -> None:
        if not self.quiet:
            self._clear()
            print(text, file=self.out, flush=True)

    def start(self, device_name: str, space_size: int, expected_rows: int) -> None:
        self.total = max(expected_rows, 1)
        self.say(f"Using: {device_name}")
        self.say(f"Searchspace has {space_size} configurations after restrictions.")

    def result(self, result: dict) -> None:
        """A measured setting's line (a failed one names its error; verbose: and why)."""
        self.done += 1
        if self.quiet:
            return
        line = config_string(result, self.keys)
        if "__error__" in result:
            line = config_string({k: v for k, v in result.items() if k != "time"}, self.keys)
            line += f", {result['__error__']}"
            if self.verbose and result.get("error"):
                line += f": {result['error']}"
        self.say(line)
        self._progress()

    def other_row(self) -> None:
        """A row that is no new setting (the re-ranking's): only the bar moves."""
        self.done += 1
        self._progress()

    def best(self, objective: str, best: dict | None, keys: list, ranking: list = ()) -> None:
        if self.quiet:
            return
        if best is None:
            self.say("no results to report")
            return
        self.say(f"\nBEST PERFORMING CONFIGURATION FOR OBJECTIVE {objective}:")
        self.say(config_string(best, keys))
        if len(ranking) > 1:  # why it can differ from the smallest mean above
            top = ranking[0]
            self.say(f"(cltune re-ranked the {len(ranking)} fastest side by side, {top['launches']} launches each, "
                     f"taking turns: this one's fastest launch {top['cltune_min_ms']:.4f} ms, median "
                     f"{top['cltune_median_ms']:.4f} ms; env['rerank'] has them all)")

    def wrong(self, results: list) -> None:
        wrong = [r for r in results if type(r.get("__error__")).__name__ == "WrongResultConfig"]
        if wrong and not self.quiet:
            self.say(f"{len(wrong)} setting(s) computed a wrong answer and were not chosen "
                     f"(Kernel Tuner stops at the first): "
                     + "; ".join(config_string(r, self.keys[:-1]) for r in wrong[:3])
                     + (" ..." if len(wrong) > 3 else ""))

    def _progress(self) -> None:
        if self.tty:
            width = 30
            filled = int(width * min(self.done, self.total) / self.total)
            self.out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}")
            self.out.flush()
            self._bar = True

    def _clear(self) -> None:
        if self._bar:
            self.out.write("\r" + " " * 50 + "\r")
            self._bar = False
