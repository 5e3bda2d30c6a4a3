"""MathAPI: BFCL's stateless calculator (arithmetic, statistics, logarithms, unit conversions).

Written from BFCL's function documentation (`multi_turn_func_doc/math_api.json`). It has no state: `state()` is
`{}`, and the odd keys some BFCL configurations give it (`precision`, `numbers`, ...) are ignored. Every tool
returns `{"result": number}`. `standard_deviation` is the population standard deviation. The unit tables below are
this module's: SI units with their prefixes, and the usual imperial/US customary units.
"""

import math
from decimal import Decimal, localcontext
from typing import Any, ClassVar

from .base import APIEnvironment, ToolError

MAX_PRECISION = 100
"""Upper bound on `precision` arguments, so that a careless call cannot stall the rollout."""

# unit -> (dimension, scale, offset, system): value in the dimension's base unit = value * scale + offset.
_UNITS: dict[str, tuple[str, float, float, str]] = {}


def _add_unit(names: tuple[str, ...], dimension: str, scale: float, system: str, offset: float = 0.0) -> None:
    for name in names:
        _UNITS[name.lower()] = (dimension, scale, offset, system)


for _names, _dim, _scale in [
    (("m", "meter", "meters", "metre", "metres"), "length", 1.0),
    (("km", "kilometer", "kilometers", "kilometre", "kilometres"), "length", 1e3),
    (("cm", "centimeter", "centimeters", "centimetre", "centimetres"), "length", 1e-2),
    (("mm", "millimeter", "millimeters", "millimetre", "millimetres"), "length", 1e-3),
    (("um", "micrometer", "micrometers", "micron", "microns"), "length", 1e-6),
    (("nm", "nanometer", "nanometers"), "length", 1e-9),
    (("kg", "kilogram", "kilograms"), "mass", 1.0),
    (("g", "gram", "grams"), "mass", 1e-3),
    (("mg", "milligram", "milligrams"), "mass", 1e-6),
    (("t", "tonne", "tonnes", "metric ton"), "mass", 1e3),
    (("s", "sec", "second", "seconds"), "time", 1.0),
    (("ms", "millisecond", "milliseconds"), "time", 1e-3),
    (("us", "microsecond", "microseconds"), "time", 1e-6),
    (("ns", "nanosecond", "nanoseconds"), "time", 1e-9),
    (("min", "minute", "minutes"), "time", 60.0),
    (("h", "hr", "hour", "hours"), "time", 3600.0),
    (("day", "days"), "time", 86400.0),
    (("l", "liter", "liters", "litre", "litres"), "volume", 1.0),
    (("ml", "milliliter", "milliliters", "millilitre", "millilitres"), "volume", 1e-3),
    (("m3", "cubic meter", "cubic meters"), "volume", 1e3),
    (("cm3", "cubic centimeter", "cubic centimeters"), "volume", 1e-3),
    (("m/s", "meters per second"), "speed", 1.0),
    (("km/h", "kph", "kilometers per hour"), "speed", 1000.0 / 3600.0),
    (("j", "joule", "joules"), "energy", 1.0),
    (("kj", "kilojoule", "kilojoules"), "energy", 1e3),
    (("w", "watt", "watts"), "power", 1.0),
    (("kw", "kilowatt", "kilowatts"), "power", 1e3),
    (("pa", "pascal", "pascals"), "pressure", 1.0),
    (("kpa", "kilopascal", "kilopascals"), "pressure", 1e3),
]:
    _add_unit(_names, _dim, _scale, "si")

for _names, _dim, _scale in [
    (("in", "inch", "inches"), "length", 0.0254),
    (("ft", "foot", "feet"), "length", 0.3048),
    (("yd", "yard", "yards"), "length", 0.9144),
    (("mi", "mile", "miles"), "length", 1609.344),
    (("oz", "ounce", "ounces"), "mass", 0.028349523125),
    (("lb", "lbs", "pound", "pounds"), "mass", 0.45359237),
    (("st", "stone", "stones"), "mass", 6.35029318),
    (("fl oz", "fluid ounce", "fluid ounces"), "volume", 0.0295735295625),
    (("cup", "cups"), "volume", 0.2365882365),
    (("pt", "pint", "pints"), "volume", 0.473176473),
    (("qt", "quart", "quarts"), "volume", 0.946352946),
    (("gal", "gallon", "gallons"), "volume", 3.785411784),
    (("mph", "miles per hour"), "speed", 0.44704),
    (("psi",), "pressure", 6894.757293168),
    (("hp", "horsepower"), "power", 745.69987158227),
    (("btu",), "energy", 1055.05585262),
]:
    _add_unit(_names, _dim, _scale, "imperial")

_add_unit(("k", "kelvin"), "temperature", 1.0, "si")
_add_unit(("c", "celsius", "degc"), "temperature", 1.0, "si", offset=273.15)
_add_unit(("f", "fahrenheit", "degf"), "temperature", 5.0 / 9.0, "imperial", offset=273.15 - 32.0 * 5.0 / 9.0)


def _unit(name: Any) -> tuple[str, float, float, str]:
    if not isinstance(name, str) or name.strip().lower() not in _UNITS:
        raise ToolError(f"Unknown unit: {name!r}.")
    return _UNITS[name.strip().lower()]


def _convert(value: float, unit_in: str, unit_out: str) -> float:
    dim_in, scale_in, offset_in, _ = _unit(unit_in)
    dim_out, scale_out, offset_out, _ = _unit(unit_out)
    if dim_in != dim_out:
        raise ToolError(f"Cannot convert {dim_in} ({unit_in}) to {dim_out} ({unit_out}).")
    return ((value * scale_in + offset_in) - offset_out) / scale_out


def _number(value: Any, what: str = "value") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f"{what} must be a number, got {value!r}.")
    return float(value)


def _numbers(values: Any) -> list[float]:
    if not isinstance(values, list) or not values:
        raise ToolError(f"numbers must be a non-empty list of numbers, got {values!r}.")
    return [_number(v, "each element of numbers") for v in values]


def _precision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PRECISION:
        raise ToolError(f"precision must be an integer from 1 to {MAX_PRECISION}, got {value!r}.")
    return value


def _finite(value: Any) -> dict[str, float]:
    if isinstance(value, complex) or not math.isfinite(value):
        raise ToolError(f"The result is not a finite real number: {value!r}.")
    return {"result": value}


class MathAPI(APIEnvironment):
    """Mathematical operations: arithmetic, statistics, logarithms and unit conversions."""

    class_name = "MathAPI"
    default_state: ClassVar[dict[str, Any]] = {}

    def absolute_value(self, number: float) -> str:
        """Calculate the absolute value of a number.

        Args:
            number: The number to calculate the absolute value of.

        Returns:
            JSON object {"result": float}.
        """
        return _finite(abs(_number(number, "number")))

    def add(self, a: float, b: float) -> str:
        """Add two numbers.

        Args:
            a: First number.
            b: Second number.

        Returns:
            JSON object {"result": float}: the sum.
        """
        return _finite(_number(a, "a") + _number(b, "b"))

    def subtract(self, a: float, b: float) -> str:
        """Subtract one number from another.

        Args:
            a: Number to subtract from.
            b: Number to subtract.

        Returns:
            JSON object {"result": float}: a - b.
        """
        return _finite(_number(a, "a") - _number(b, "b"))

    def multiply(self, a: float, b: float) -> str:
        """Multiply two numbers.

        Args:
            a: First number.
            b: Second number.

        Returns:
            JSON object {"result": float}: the product.
        """
        return _finite(_number(a, "a") * _number(b, "b"))

    def divide(self, a: float, b: float) -> str:
        """Divide one number by another.

        Args:
            a: Numerator.
            b: Denominator.

        Returns:
            JSON object {"result": float}: the quotient, or an error when dividing by zero.
        """
        if _number(b, "b") == 0:
            raise ToolError("Cannot divide by zero.")
        return _finite(_number(a, "a") / float(b))

    def power(self, base: float, exponent: float) -> str:
        """Raise a number to a power.

        Args:
            base: The base number.
            exponent: The exponent.

        Returns:
            JSON object {"result": float}: base raised to the power of exponent.
        """
        try:
            return _finite(_number(base, "base") ** _number(exponent, "exponent"))
        except (OverflowError, ZeroDivisionError) as exc:
            raise ToolError(f"power({base}, {exponent}) is undefined or too large: {exc}.") from exc

    def square_root(self, number: float, precision: int) -> str:
        """Calculate the square root of a number with adjustable precision using the decimal module.

        Args:
            number: The number to calculate the square root of.
            precision: Desired precision for the result (significant digits).

        Returns:
            JSON object {"result": float}, or an error for a negative number.
        """
        value = _number(number, "number")
        if value < 0:
            raise ToolError("Cannot calculate the square root of a negative number.")
        with localcontext() as context:
            context.prec = _precision(precision)
            return _finite(float(Decimal(value).sqrt()))

    def logarithm(self, value: float, base: float, precision: int) -> str:
        """Compute the logarithm of a number with adjustable precision.

        Args:
            value: The number to compute the logarithm of.
            base: The base of the logarithm.
            precision: Desired precision for the result (significant digits).

        Returns:
            JSON object {"result": float}: the logarithm of value with respect to base.
        """
        x, b = _number(value, "value"), _number(base, "base")
        if x <= 0 or b <= 0 or b == 1:
            raise ToolError("The value and the base must be positive, and the base must not be 1.")
        with localcontext() as context:
            context.prec = _precision(precision)
            return _finite(float(Decimal(x).ln() / Decimal(b).ln()))

    def round_number(self, number: float, decimal_places: int = 0) -> str:
        """Round a number to a specified number of decimal places.

        Args:
            number: The number to round.
            decimal_places: The number of decimal places to round to. Defaults to 0.

        Returns:
            JSON object {"result": float}: the rounded number.
        """
        if isinstance(decimal_places, bool) or not isinstance(decimal_places, int):
            raise ToolError(f"decimal_places must be an integer, got {decimal_places!r}.")
        return _finite(float(round(_number(number, "number"), decimal_places)))

    def percentage(self, part: float, whole: float) -> str:
        """Calculate the percentage of a part relative to a whole.

        Args:
            part: The part value.
            whole: The whole value.

        Returns:
            JSON object {"result": float}: 100 * part / whole.
        """
        if _number(whole, "whole") == 0:
            raise ToolError("Whole value cannot be zero.")
        return _finite(_number(part, "part") / float(whole) * 100.0)

    def max_value(self, numbers: list[float]) -> str:
        """Find the maximum value in a list of numbers.

        Args:
            numbers: List of numbers to find the maximum from.

        Returns:
            JSON object {"result": float}.
        """
        return _finite(max(_numbers(numbers)))

    def min_value(self, numbers: list[float]) -> str:
        """Find the minimum value in a list of numbers.

        Args:
            numbers: List of numbers to find the minimum from.

        Returns:
            JSON object {"result": float}.
        """
        return _finite(min(_numbers(numbers)))

    def sum_values(self, numbers: list[float]) -> str:
        """Calculate the sum of a list of numbers.

        Args:
            numbers: List of numbers to sum.

        Returns:
            JSON object {"result": float}.
        """
        return _finite(math.fsum(_numbers(numbers)))

    def mean(self, numbers: list[float]) -> str:
        """Calculate the mean of a list of numbers.

        Args:
            numbers: List of numbers to calculate the mean of.

        Returns:
            JSON object {"result": float}.
        """
        values = _numbers(numbers)
        return _finite(math.fsum(values) / len(values))

    def standard_deviation(self, numbers: list[float]) -> str:
        """Calculate the (population) standard deviation of a list of numbers.

        Args:
            numbers: List of numbers to calculate the standard deviation of.

        Returns:
            JSON object {"result": float}.
        """
        values = _numbers(numbers)
        mean = math.fsum(values) / len(values)
        return _finite(math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)))

    def si_unit_conversion(self, value: float, unit_in: str, unit_out: str) -> str:
        """Convert a value from one SI unit to another (e.g. 'km' to 'm', 'g' to 'kg', 'celsius' to 'kelvin').

        Args:
            value: Value to be converted.
            unit_in: Unit of the input value.
            unit_out: Unit to convert the value to.

        Returns:
            JSON object {"result": float}: the converted value.
        """
        for unit in (unit_in, unit_out):
            if _unit(unit)[3] != "si":
                raise ToolError(f"'{unit}' is not an SI unit; use imperial_si_conversion.")
        return _finite(_convert(_number(value), unit_in, unit_out))

    def imperial_si_conversion(self, value: float, unit_in: str, unit_out: str) -> str:
        """Convert a value between imperial and SI units (e.g. 'ft' to 'm', 'kg' to 'lb', 'fahrenheit' to 'celsius').

        Args:
            value: Value to be converted.
            unit_in: Unit of the input value.
            unit_out: Unit to convert the value to.

        Returns:
            JSON object {"result": float}: the converted value.
        """
        systems = {_unit(unit_in)[3], _unit(unit_out)[3]}
        if systems != {"si", "imperial"}:
            raise ToolError("imperial_si_conversion converts between an imperial and an SI unit.")
        return _finite(_convert(_number(value), unit_in, unit_out))
