"""A sweep's parameters from untrusted input: a grid or a list of points, checked, expanded.

Input (API JSON; the form's lines are turned into the same by `parse_parameter_lines`):

- `parameters`: name -> values, the grid is every combination (the first name varies slowest):
  a list (`[0.0001, 0.0003]`), a range `{"range": [start, stop, step]}` (stop included when a
  step lands on it; decimal arithmetic, so 0.1 steps do not drift), or a log range
  `{"log": [start, stop, count]}` (count values from start to stop, both included, equal
  ratios between them);
- or `points`: an explicit list of objects, each giving every parameter a value.

Every value is a whole number, a finite decimal number or a short text of plain characters
(letters, digits and `._+-:=/,@`): each task gets them as environment variables named after
the parameters, and the command template's `{name}` becomes `${name}`, an expansion of that
variable. The values are never shell code, and their characters cannot be split or globbed
even where the user's command leaves `{name}` unquoted.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from jobs.submission.spec import ENV_NAME_RE, SpecError, is_reserved_env_name

MAX_PARAMETERS = 16
MAX_VALUES_PER_PARAMETER = 10_000
MAX_TEXT_CHARS = 128
TEXT_VALUE_RE = re.compile(r"[A-Za-z0-9._+\-:=/,@]{1,128}", re.ASCII)
# A placeholder in the command template: `{lr}`, not `${lr}` (already the shell's own).
PLACEHOLDER_RE = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")

Value = int | float | str


@dataclass(frozen=True)
class Grid:
    """The checked parameters: their names in order and every point's values."""

    names: tuple[str, ...]
    points: tuple[tuple[Value, ...], ...]

    def __len__(self) -> int:
        return len(self.points)

    def point(self, index: int) -> dict[str, Value]:
        return dict(zip(self.names, self.points[index], strict=True))

    def environment(self, index: int) -> dict[str, str]:
        """The task's parameters as environment variables (name -> value text)."""
        return {name: value_text(value) for name, value in self.point(index).items()}

    def to_dict(self) -> dict:
        return {"names": list(self.names), "points": [list(point) for point in self.points]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grid:
        return cls(tuple(data["names"]), tuple(tuple(point) for point in data["points"]))


def value_text(value: Value) -> str:
    """How a value reaches the task: `repr` of a float is the shortest text that reads back
    as the same number (0.0003, not 0.00029999999999999997)."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_sweep_parameters(data: Mapping[str, Any], *, max_points: int, reserved: Sequence[str] = ()) -> Grid:
    """`data` holds `parameters` (a grid) or `points`; returns the Grid or raises SpecError
    naming every problem. `reserved`: names the base job's environment already uses."""
    errors: dict[str, list[str]] = {}

    def error(message: str, field: str = "parameters") -> None:
        errors.setdefault(field, []).append(message)

    grid_input, points_input = data.get("parameters"), data.get("points")
    if grid_input not in (None, {}, "") and points_input not in (None, [], ""):
        error("give either parameters (a grid) or points (a list), not both")
        raise SpecError(errors)
    if points_input not in (None, [], ""):
        grid = _parse_points(points_input, max_points, reserved, error)
    elif grid_input not in (None, {}, ""):
        grid = _parse_grid(grid_input, max_points, reserved, error)
    else:
        error("give the parameters to sweep: a grid of values per name, or a list of points")
        grid = None
    if errors or grid is None:
        raise SpecError(errors)
    return grid


def _check_name(name: Any, reserved: Sequence[str], error) -> bool:
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        shown = name if isinstance(name, str) and len(name) <= 64 and name.isprintable() else "a name"
        error(f"{shown!r} is not a parameter name (letters, digits, _; not starting with a digit)")
        return False
    if is_reserved_env_name(name):
        error(f"{name} is reserved (the portal, Slurm or the runtime sets it)")
        return False
    if name in reserved:
        error(f"{name} is also set in the job's environment; rename one of them")
        return False
    return True


def _parse_grid(value: Any, max_points: int, reserved: Sequence[str], error) -> Grid | None:
    if not isinstance(value, Mapping):
        error("must be an object: parameter name -> list of values, {range: [...]} or {log: [...]}")
        return None
    if len(value) > MAX_PARAMETERS:
        error(f"at most {MAX_PARAMETERS} parameters (got {len(value)})")
        return None
    names, axes = [], []
    for name, spec in value.items():
        if not _check_name(name, reserved, error):
            continue
        axis = _parse_axis(name, spec, max_points, error)
        if axis is not None:
            names.append(name)
            axes.append(axis)
    if len(names) != len(value):
        return None
    total = math.prod(len(axis) for axis in axes)
    if total > max_points:
        sizes = " x ".join(str(len(axis)) for axis in axes)
        error(f"the grid has {total} points ({sizes}); a sweep has at most {max_points}")
        return None
    return Grid(tuple(names), tuple(itertools.product(*axes)))


def _parse_axis(name: str, spec: Any, max_points: int, error) -> list[Value] | None:
    if isinstance(spec, list):
        if not spec:
            error(f"{name}: give at least one value")
            return None
        if len(spec) > min(max_points, MAX_VALUES_PER_PARAMETER):
            error(f"{name}: at most {min(max_points, MAX_VALUES_PER_PARAMETER)} values")
            return None
        values = [_parse_value(name, item, error) for item in spec]
        if any(item is None for item in values):
            return None
        if len(set(map(value_text, values))) != len(values):
            error(f"{name}: a value is listed twice")
            return None
        return values
    if isinstance(spec, Mapping) and set(spec) == {"range"}:
        return _range_axis(name, spec["range"], max_points, error)
    if isinstance(spec, Mapping) and set(spec) == {"log"}:
        return _log_axis(name, spec["log"], max_points, error)
    error(f'{name}: give a list of values, {{"range": [start, stop, step]}} or {{"log": [start, stop, count]}}')
    return None


def _number(name: str, value: Any, error) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        error(f"{name}: {value!r} is not a number")
        return None
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        error(f"{name}: {str(value)[:32]!r} is not a number")
        return None
    if not number.is_finite() or abs(number) > Decimal(10) ** 15:
        error(f"{name}: numbers must be finite and at most 1e15")
        return None
    return number


def _as_value(number: Decimal) -> Value:
    if number == number.to_integral_value() and abs(number) < 2**53:
        return int(number)
    return float(number)


def _range_axis(name: str, spec: Any, max_points: int, error) -> list[Value] | None:
    if not isinstance(spec, list) or len(spec) != 3:
        error(f"{name}: a range is [start, stop, step]")
        return None
    start, stop, step = (_number(name, item, error) for item in spec)
    if start is None or stop is None or step is None:
        return None
    if step <= 0 or stop < start:
        error(f"{name}: a range needs start <= stop and a step above 0")
        return None
    count = int((stop - start) / step) + 1
    if count > min(max_points, MAX_VALUES_PER_PARAMETER):
        error(f"{name}: the range has {count} values; at most {min(max_points, MAX_VALUES_PER_PARAMETER)}")
        return None
    return [_as_value(start + step * index) for index in range(count)]


def _log_axis(name: str, spec: Any, max_points: int, error) -> list[Value] | None:
    if not isinstance(spec, list) or len(spec) != 3:
        error(f"{name}: a log range is [start, stop, count]")
        return None
    start, stop, count = (_number(name, item, error) for item in spec)
    if start is None or stop is None or count is None:
        return None
    if start <= 0 or stop <= start or count != count.to_integral_value() or not 2 <= count:
        error(f"{name}: a log range needs 0 < start < stop and a whole count of 2 or more")
        return None
    if count > min(max_points, MAX_VALUES_PER_PARAMETER):
        error(f"{name}: at most {min(max_points, MAX_VALUES_PER_PARAMETER)} values")
        return None
    steps = int(count) - 1
    ratio = (float(stop) / float(start)) ** (1 / steps)
    # Six significant digits: 1e-05, 3.16228e-05, ... reads as what was meant.
    return [float(f"{float(start) * ratio**index:.6g}") for index in range(steps)] + [_as_value(stop)]


def _parse_value(name: str, value: Any, error) -> Value | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) > 10**15:
            error(f"{name}: numbers must be at most 1e15")
            return None
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            error(f"{name}: numbers must be finite")
            return None
        return value
    if isinstance(value, str) and TEXT_VALUE_RE.fullmatch(value):
        return value
    shown = value[:32] if isinstance(value, str) else type(value).__name__
    error(
        f"{name}: {shown!r} is not a value: a number, or up to {MAX_TEXT_CHARS} letters, digits and ._+-:=/,@ "
        "(no spaces, quotes or shell characters)"
    )
    return None


def _parse_points(value: Any, max_points: int, reserved: Sequence[str], error) -> Grid | None:
    if not isinstance(value, list) or not all(isinstance(point, Mapping) for point in value):
        error("must be a list of objects, each giving every parameter a value", "points")
        return None
    if len(value) > max_points:
        error(f"{len(value)} points; a sweep has at most {max_points}", "points")
        return None
    names = list(value[0])
    if not names or len(names) > MAX_PARAMETERS:
        error(f"each point gives 1 to {MAX_PARAMETERS} parameters", "points")
        return None
    if not all(_check_name(name, reserved, lambda m: error(m, "points")) for name in names):
        return None
    points = []
    for number, point in enumerate(value, start=1):
        if set(point) != set(names):
            error(f"point {number} does not give exactly the parameters {', '.join(names)}", "points")
            return None
        values = tuple(_parse_value(name, point[name], lambda m: error(m, "points")) for name in names)
        if any(item is None for item in values):
            return None
        points.append(values)
    if len({tuple(map(value_text, point)) for point in points}) != len(points):
        error("a point is listed twice", "points")
        return None
    return Grid(tuple(names), tuple(points))


_LINE_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*")
_CALL_RE = re.compile(r"(range|log)\((.*)\)")


def parse_parameter_lines(text: str) -> dict:
    """The form's lines (`lr = 0.0001, 0.0003`, `bs = range(16, 64, 16)`, `wd = log(1e-5, 1e-2, 4)`)
    as the API's `parameters` object; SpecError on a line that is none of these."""
    parameters: dict[str, Any] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE_RE.fullmatch(line)
        if not match:
            problems.append(f"line {number}: expected name = values")
            continue
        name, values = match.groups()
        if name in parameters:
            problems.append(f"line {number}: {name} is given twice")
            continue
        call = _CALL_RE.fullmatch(values)
        items = [item.strip() for item in (call.group(2) if call else values).split(",")]
        if call:
            parameters[name] = {call.group(1): items}
        else:
            parameters[name] = [_typed(item) for item in items]
    if problems:
        raise SpecError({"parameters": problems})
    return parameters


def _typed(text: str) -> Value:
    """A form's value: a number where it reads as one, else the text (checked later)."""
    try:
        number = Decimal(text)
    except InvalidOperation:
        return text
    if not number.is_finite():
        return text
    if number == number.to_integral_value() and "." not in text and "e" not in text.lower():
        return int(number)
    return float(text)


def command_for_tasks(command: str, names: Sequence[str]) -> str:
    """The command template with each `{name}` of a parameter made `${name}`: the task's value,
    expanded by the shell from its environment (never pasted in as text). Other braces (shell
    brace expansion, `${VAR}`, JSON) are left as written."""
    known = set(names)
    return PLACEHOLDER_RE.sub(lambda m: "${" + m.group(1) + "}" if m.group(1) in known else m.group(0), command)


def command_shown(command: str, point: Mapping[str, Value]) -> str:
    """The command as one task runs it, for people to read (the task page): values pasted in."""
    return PLACEHOLDER_RE.sub(lambda m: value_text(point[m.group(1)]) if m.group(1) in point else m.group(0), command)
