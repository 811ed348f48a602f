"""Text contrast in an SVG as WCAG 2.x defines it (relative luminance of sRGB colours), with what each text is drawn
on read from the SVG's geometry: the last filled rectangle drawn before it that holds its anchor point, else the
page (white). Written here because the rule is six lines of arithmetic from the WCAG text."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
WHITE = "#FFFFFF"


def luminance(colour: str) -> float:
    """WCAG 2.x relative luminance of an sRGB #RRGGBB or #RGB colour."""
    h = colour.lstrip("#")
    h = "".join(c * 2 for c in h) if len(h) == 3 else h
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (int(h[i:i + 2], 16) / 255
                                                                                  for i in (0, 2, 4))]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _css(root: ET.Element) -> list[tuple[str | None, set[str], dict[str, str]]]:
    """The <style> rules as (element or None, classes, declarations); selectors are `el.a.b` or `.a`."""
    rules = []
    for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", root.find(f"{NS}style").text):
        decls = dict(d.split(":", 1) for d in body.split(";") if ":" in d)
        for one in sel.split(","):
            el, *classes = one.strip().split(".")
            rules.append((el or None, set(classes), decls))
    return rules


def _text_fill(text: ET.Element, rules) -> str:
    fill = text.get("fill", "#000000")
    classes = set((text.get("class") or "").split())
    for el, want, decls in rules:  # rules in order, later ones win; specificity is equal in these files
        if want and want <= classes and el in (None, "text") and "fill" in decls:
            fill = decls["fill"].strip()
    return fill


def low_contrast(path) -> list[tuple[str, str, str, float]]:
    """(text, its fill, the fill under its anchor point, ratio) for every text under 4.5:1. What a text sits on
    is the last filled rectangle drawn before it that holds its anchor point, else the page (white)."""
    root = ET.parse(path).getroot()
    rules = _css(root)
    order = {id(e): i for i, e in enumerate(root.iter())}
    rects = [(order[id(r)], r) for r in root.iter(f"{NS}rect") if r.get("fill") not in (None, "none")]
    bad = []
    for t in root.iter(f"{NS}text"):
        x, y = float(t.get("x")), float(t.get("y")) - 3  # a point inside the glyphs, above the baseline
        under = WHITE
        for i, r in rects:
            x0, y0 = float(r.get("x")), float(r.get("y"))
            if i < order[id(t)] and x0 <= x <= x0 + float(r.get("width")) and y0 <= y <= y0 + float(r.get("height")):
                under = r.get("fill")
        fill = _text_fill(t, rules)
        if contrast(fill, under) < 4.5:
            bad.append((t.text, fill, under, round(contrast(fill, under), 2)))
    return bad
