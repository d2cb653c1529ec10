"""The notebook display of the IR (``Jaxpr._repr_html_`` / ``ClosedJaxpr._repr_html_``)."""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser

import numpy as np

import ftrans
import ftrans.numpy as jnp
from ftrans import lax

x3 = np.arange(3, dtype=np.float32)
VOID = {"br", "hr", "img", "input", "meta", "link", "col", "wbr"}
BLOCK = {"div", "table", "tr", "td", "details", "summary"}


class _Checker(HTMLParser):
    """Collects text and tag counts; fails on an unbalanced or mis-nested tag."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.tags: dict[str, int] = {}
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag in BLOCK:  # as a browser lays it out (and copies it): block elements break the text
            self.text.append("\n")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "style":
            return
        self.text.append(data)


def parse(html: str) -> _Checker:
    c = _Checker()
    c.feed(html)
    c.close()
    assert not c.errors, c.errors[:5]
    assert not c.stack, f"unclosed tags: {c.stack}"
    return c


def text_of(html: str) -> str:
    return "".join(parse(html).text)


def test_simple_program_has_typed_variables_and_source_lines():
    def f(x, y):
        z = jnp.sin(x) * 2.0
        return z + y

    closed = ftrans.make_jaxpr(f)(x3, x3)
    html = closed._repr_html_()
    text = text_of(html)
    for binder in ("a:f32[3]", "b:f32[3]", "c:f32[3]", "d:f32[3]", "e:f32[3]", "2.0:f32[]"):
        assert binder in text
    assert "{ lambda ; a:f32[3] b:f32[3]. let" in text
    assert "in (e,) }" in text
    # One row per equation, each with the user's file:line.
    c = parse(html)
    assert c.tags["tr"] == len(closed.eqns) == 3
    line = f.__code__.co_firstlineno
    assert f"test_ir_html.py:{line + 1}" in text
    assert f"test_ir_html.py:{line + 2}" in text
    assert "<script" not in html.lower()
    # The Jaxpr itself renders too, the same way.
    assert closed.jaxpr._repr_html_() == html


def _names_in(s: str) -> set[str]:
    """Every variable name the text printer uses (``name:type`` binders)."""
    return set(re.findall(r"\b([a-z]+):[a-z0-9]+\[", s))


def test_names_match_the_text_printer():
    def f(x):
        for _ in range(30):
            x = jnp.cos(x) + 1.0
        return x

    closed = ftrans.make_jaxpr(f)(x3)
    text = text_of(closed._repr_html_())
    printed = str(closed)
    names = _names_in(printed)
    assert "bh" in names
    for line in printed.splitlines()[1:-1]:
        lhs = line.strip().split(" = ")[0]
        assert lhs in text, lhs


def _control_flow_program(x):
    def body(c, r):
        h = jnp.tanh(c * r)
        return h, h.sum()

    y = lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
    n, y = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5), (0, y))
    h, ys = lax.scan(body, y, jnp.stack([x, x]))
    return ftrans.jit(lambda q: q + 1.0)(h) + ys.sum()


def test_control_flow_bodies_are_collapsible_details():
    closed = ftrans.make_jaxpr(_control_flow_program)(x3)
    html = closed._repr_html_()
    c = parse(html)
    # cond: two branches; while: cond_jaxpr, body_jaxpr; scan: jaxpr; jit_call: jaxpr
    assert c.tags["details"] == c.tags["summary"] == 6
    text = "".join(c.text)
    for label in ("branches[0]", "branches[1]", "cond_jaxpr", "body_jaxpr", "jaxpr:"):
        assert label in text
    # Every name of the text printer appears, with the same type, nested bodies included.
    printed = str(closed)
    binder = re.compile(r"\b[a-z_]+:[a-z0-9]+\[[0-9,]*\]")
    binders = binder.findall(printed)
    assert len(binders) > 20
    # The same binders in the same order: each name denotes the same variable in both.
    assert binder.findall(text) == binders
    # Nested equations keep their source lines (the scan body's tanh).
    tanh_line = _control_flow_program.__code__.co_firstlineno + 2
    assert f"test_ir_html.py:{tanh_line}" in text
    # Nested bodies sit inside an equation's row, not after the table.
    assert re.search(r"<td>= <span class=\"p\">scan</span>.*?<details>", html)


def test_nested_closed_jaxpr_with_consts_and_custom_rules():
    @ftrans.custom_jvp
    def g(a):
        return a * 3.0

    g.defjvp(lambda p, t: (g(*p), t[0] * 3.0))
    w = np.ones((3, 3), np.float32)

    def f(x):
        return lax.cond(x[0] > 0, lambda a: a @ w, lambda a: g(a), x)

    closed = ftrans.make_jaxpr(f)(x3)
    html = closed._repr_html_()
    c = parse(html)
    assert c.tags["details"] == 3  # two branches, and the custom_jvp_call body
    text = "".join(c.text)
    assert "call_jaxpr" in text
    assert "custom_jvp_call" in text


def test_everything_is_escaped():
    # jit_call's name param is `<lambda>`; source info of a lambda names `<lambda>` too.
    closed = ftrans.make_jaxpr(lambda x: ftrans.jit(lambda y: y * 2.0)(x))(x3)
    assert "<lambda>" in str(closed)
    html = closed._repr_html_()
    assert "<lambda>" not in html
    assert "&lt;lambda&gt;" in html
    assert "name=<lambda>" in text_of(html)
    parse(html)


def test_grad_program_and_empty_bodies():
    closed = ftrans.make_jaxpr(ftrans.grad(lambda x: jnp.sin(x).sum()))(x3)
    parse(closed._repr_html_())
    ident = ftrans.make_jaxpr(lambda x: x)(x3)
    text = text_of(ident._repr_html_())
    assert "{ lambda ; a:f32[3]. let" in text and "in (a,) }" in text


def test_large_program_is_fast():
    def f(x):
        for _ in range(500):
            x = jnp.sin(x) * 2.0
        return x

    closed = ftrans.make_jaxpr(f)(x3)
    assert len(closed.eqns) == 1000
    t0 = time.perf_counter()
    html = closed._repr_html_()
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.2, f"{elapsed:.3f} s for 1000 equations"
    assert html.count("<tr>") == 1000
