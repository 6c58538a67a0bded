"""Manual pages (roff: the man(7) and mdoc(7) macros) rendered to plain text for indexing.

Search needs the words, in reading order, with the section headings; not a typeset page. So
this renders the common macros itself, in Python, instead of running groff: groff is not on
every machine (macOS, minimal containers), costs a process per page (tens of ms; a system
holds ~10,000 pages), and its terminal layout hyphenates and breaks words across lines,
which the index would then store. What is kept: the title (``CHSH(1)``), section headings
(``.SH``/``.Sh``) on lines of their own, paragraphs joined into lines, tagged items, tables
as rows, literal blocks line by line, and every special character and accent (``\\(:a`` ä,
``\\[u00E4]`` ä, ``\\(em`` —). What is dropped: fonts and sizes, comments, macro and string
definitions, conditionals, spacing and motion escapes. Nothing is executed and no other file
is read: ``.so other.1`` (a page that only points at another) becomes "See other.1".
"""

from __future__ import annotations

import re
import unicodedata

from .extract_base import ExtractedText
from .extract_text import decode_text

#: two-character special characters (groff_char(7)) that are not accent composites
_SPECIAL = {
    "em": "—", "en": "–", "hy": "-", "mi": "-", "pl": "+", "eq": "=", "mu": "×", "di": "÷", "bu": "•",
    "co": "©", "rg": "®", "tm": "™", "de": "°", "lq": "“", "rq": "”", "oq": "‘", "cq": "’", "aq": "'",
    "dq": '"', "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "->": "→", "<-": "←", "<>": "↔", "=>": "⇒",
    ">=": "≥", "<=": "≤", "!=": "≠", "+-": "±", "ti": "~", "ha": "^", "rs": "\\", "ga": "`", "ul": "_",
    "ba": "|", "bv": "|", "sl": "/", "sh": "#", "Do": "$", "at": "@", "lB": "[", "rB": "]", "lC": "{",
    "rC": "}", "la": "⟨", "ra": "⟩", "ss": "ß", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "/o": "ø",
    "/O": "Ø", "oa": "å", "oA": "Å", "-D": "Ð", "Sd": "ð", "TP": "Þ", "Tp": "þ", "r!": "¡", "r?": "¿",
    "ct": "¢", "Po": "£", "Ye": "¥", "Eu": "€", "eu": "€", "ps": "¶", "sc": "§", "fm": "′", "sd": "″",
    "dg": "†", "dd": "‡", "ci": "○", "sq": "□", "OK": "✓", "12": "½", "14": "¼", "34": "¾", "S1": "¹",
    "S2": "²", "S3": "³", "aa": "´", "a-": "¯", "a^": "^", "a~": "~", "ad": "¨", "ac": "¸", "if": "∞",
    "mc": "µ", "*m": "μ", "*p": "π", "ap": "~", "bq": "„", "Bq": "„",
}
#: accent composites: \(:a ä, \('e é, \(`a à, \(^o ô, \(~n ñ, \(,c ç, \(vs š, \(oa å
_ACCENTS = {":": "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", ",": "\u0327",
            "v": "\u030c", "o": "\u030a"}
#: predefined strings of the man macros (\*(lq, \*R, ...)
_STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "Aq": "'", "S": "", "HF": "", "ga": "`", "aq": "'"}
#: requests and macros that only format (or define): dropped with their arguments
_DROP = frozenset("""br sp ne nf fi ad na nh hy in ti ll lt pl po ps vs ft fam ss cs cu ul uf bp pn
 nm nn ta tc lc fc mk rt ev hc hw ce rj nr rr rm rn als tr ec eo cc c2 lf cf pc mso ig de am ds ds1
 as ch wh it dt di da em blm ns rs ab ex tm tm1 mc pm sy pi open close write opena ls do nop warn
 ft PD UC AT DT RS RE IX TQ in HP LP PP P Pp Lp Bl El Ed Ek Bk Os Dt Dd Ud Sm Bf Ef Bd ME UE YS LINKSTYLE
 hla hpf hpfa hym hys kern lg nroff troff pso shc sizes special fspecial fschar schar tkf vpt cp
 EE EX ie if el""".split())
#: mdoc macros whose name, inside a line, is a word to drop (Op, Fl, Ar ...): the rest stays
_MDOC_INLINE = frozenset("""Ar Ad An Cd Cm Dv Er Ev Fa Fd Fn Ft Ic Li Nm Pa Sy Va Vt Em Ms Sx Tn Ux
 Op Oo Oc Ql Qq Qo Qc Dq Do Dc Sq So Sc Pq Po Pc Bq Bo Bc Brq Bro Brc Aq Ao Ac Eo Ec Ns No Pf Xo Xc
 Bsx Fx Nx Ox At St Lk Mt In Ot Lb Rv Ex Fo Fc Dl D1 It Nd Xr Fl Ta""".split())
#: man macros whose arguments are words in another font
_FONT_MACROS = frozenset(("B", "I", "SM", "SB"))
#: mdoc macros that stand for a word
_MDOC_WORDS = {"Ux": "UNIX", "Bx": "BSD", "Ox": "OpenBSD", "Fx": "FreeBSD", "Nx": "NetBSD", "Bsx": "BSD/OS",
               "At": "AT&T UNIX"}
_MDOC_QUOTES = {"Dq": ("“", "”"), "Qq": ('"', '"'), "Sq": ("‘", "’"), "Op": ("[", "]"), "Pq": ("(", ")"),
                "Bq": ("[", "]"), "Brq": ("{", "}"), "Aq": ("⟨", "⟩"), "Ql": ("'", "'")}

_ESCAPE = re.compile(r"""\\(?:
    (?P<font>[fFmM](?:\[[^\]]*\]|\([^\s]{2}|.))
  | (?P<size>s(?:[+-]?\d|\([+-]?\d\d|\[[^\]]*\]|[+-]\(\d\d|'[^']*'))
  | (?P<special>\([^\s]{2}|\[[^\]]*\]|C'[^']*')
  | (?P<string>\*(?:\[[^\]]*\]|\([^\s]{2}|.))
  | (?P<register>[ngYV](?:\[[^\]]*\]|\([^\s]{2}|.))
  | (?P<char>N'\d+')
  | (?P<delim>[whvlLDXoZbxHSRAB]'[^']*')
  | (?P<mark>k.|z.|\$.?)
  | (?P<other>.)
)""", re.VERBOSE)
_OTHER = {"-": "-", " ": " ", "~": " ", "0": " ", "e": "\\", "\\": "\\", ".": ".", "'": "'", "`": "`",
          "t": " ", "_": "_", "|": "", "^": "", "&": "", ")": "", "%": "", "c": "", ":": "", "/": "",
          ",": "", "!": "", "p": "", "r": "", "u": "", "d": "", "a": "", "E": "", "{": "", "}": "", "?": ""}
_ARG = re.compile(r'"((?:[^"]|"")*)"?|(\S+)')
_TITLE = re.compile(r"^[.'][ \t]*(TH|Dt)\b")


def looks_like_roff(head: bytes) -> bool:
    """Whether the first bytes of a text file are a manual page (a title or section macro, or
    a one-line ``.so`` pointer): ``ls.1``, ``chsh.1.gz`` are; a README or a rotated log is not."""
    return bool(re.search(rb"^\.[ \t]*(TH|Dd|SH|Sh)[ \t]", head, re.M)) or bool(
        re.fullmatch(rb"\s*\.so[ \t]+\S+\s*", head[:300]))


def extract_man(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``man`` kind (see :mod:`hefsearch.readers.formats`), within the
    page's budget (:mod:`hefsearch.readers.budget`: its time is checked line by line)."""
    from .budget import reading

    source, encoding = decode_text(data)
    with reading("manual page", max_chars) as budget:
        return ExtractedText(text=render(source, budget.tick), encoding=encoding)


def render(source: str, tick=None) -> str:
    """roff source -> plain text: the title, headings and paragraphs (see the module doc);
    ``tick()`` is called at every line (the document's budget)."""
    r = _Renderer()
    for line in source.split("\n"):
        r.line(line)
        if tick is not None:
            tick()
    return r.text()


class _Renderer:
    def __init__(self) -> None:
        self.out: list[str] = []  # finished lines ("" separates paragraphs)
        self.para: list[str] = []  # words of the paragraph being filled
        self.fill = True
        self.skip_until: str | None = None  # ".." ends a .de/.ig block
        self.table = False
        self.table_format = False
        self.table_tab = "\t"
        self.strings = dict(_STRINGS)
        self.tag_next = False  # .TP: the next line is the item's tag

    # -- output -------------------------------------------------------------------------
    def text(self) -> str:
        self.flush()
        text = "\n".join(self.out)
        return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"

    def flush(self) -> None:
        if self.para:
            self.out.append(re.sub(r"[ \t]+", " ", " ".join(self.para)).strip())
            self.para = []

    def emit_line(self, text: str) -> None:
        self.flush()
        self.out.append(text.rstrip())

    def break_paragraph(self) -> None:
        self.flush()
        if self.out and self.out[-1] != "":
            self.out.append("")

    def words(self, text: str) -> None:
        if not text.strip():
            if not self.fill:
                self.emit_line("")
            else:
                self.break_paragraph()
            return
        if self.tag_next:
            self.tag_next = False
            self.emit_line(text.strip())
        elif self.fill:
            self.para.append(text.strip())
        else:
            self.emit_line(text)

    # -- input --------------------------------------------------------------------------
    def line(self, raw: str) -> None:
        if self.skip_until is not None:
            if raw.strip() == self.skip_until or raw.startswith(self.skip_until + " "):
                self.skip_until = None
            return
        if raw[:1] in (".", "'") and raw[1:3] not in ('\\"', "\\#"):
            self.request(raw[1:].lstrip())
            return
        if raw[:1] in (".", "'"):
            return  # a comment line
        if self.table:
            self.table_row(raw)
            return
        self.words(self.inline(raw))

    def request(self, body: str) -> None:
        """A control line: definitions, then structure, then macros that carry words."""
        name, _, rest = body.partition(" ")
        name, rest = name.strip(), rest.strip()
        if "\t" in name:
            name, _, more = name.partition("\t")
            rest = (more + " " + rest).strip()
        if name and not self._definition(name, rest) and not self._structure(name, rest):
            self._macro_words(name, rest)

    def _definition(self, name: str, rest: str) -> bool:
        """Macro, string and conditional definitions: skipped, strings kept for ``\\*``."""
        if name in ("de", "de1", "am", "ig"):
            self.skip_until = "." + (_args(rest)[1] if name != "ig" and len(_args(rest)) > 1 else ".")
        elif name in ("ds", "ds1", "as"):
            key, _, value = rest.partition(" ")
            value = value[1:] if value.startswith('"') else value
            if name != "as":
                self.strings.setdefault(key, self.inline(value))
        elif name in ("ie", "if", "el"):
            inner = re.sub(r"^(?:!?\\n\S+|!?[ntoe]\b|\S+)\s*", "", rest, count=1) if name != "el" else rest
            if inner.startswith((".ds", "'ds")):  # .ie \n(.g .ds Aq \(aq: the first branch wins
                self.request(inner[1:])
        else:
            return False
        return True

    def _structure(self, name: str, rest: str) -> bool:
        """Title, headings, paragraphs, items, tables, literal blocks."""
        if name in ("TS", "TE"):
            self.break_paragraph()
            self.table, self.table_format, self.table_tab = name == "TS", name == "TS", "\t"
        elif name in ("TH", "Dt"):
            a = _args(rest)
            if a:
                self.emit_line(self.inline(a[0]) + (f"({self.inline(a[1])})" if len(a) > 1 else ""))
                self.break_paragraph()
        elif name in ("SH", "SS", "Sh", "Ss"):
            self.break_paragraph()
            if rest:
                self.emit_line(self.inline(" ".join(_args(rest))))
            else:
                self.tag_next = True  # the heading is on the next line
        elif name in ("nf", "EX", "Bd", "Vb", "fi", "EE", "Ed", "Ve"):
            self.flush()
            self.fill = name in ("fi", "EE", "Ed", "Ve")
        elif name in ("PP", "LP", "P", "Pp", "Lp", "HP", "sp", "RS", "RE", "Bl", "El", "TP", "SY"):
            self.break_paragraph()
            self.tag_next = name == "TP"
            if name == "SY":
                self.words(self.inline(rest))
        elif name == "br":
            self.flush()
        elif name in ("IP", "It"):
            self.break_paragraph()
            a = _args(rest)
            self._words_if_any(self.inline(_mdoc_text(a) if name == "It" else (a[0] if a else "")))
            self.flush()
        elif name == "so":
            self.words(f"See {rest}.")
        else:
            return False
        return True

    def _macro_words(self, name: str, rest: str) -> None:
        """Font, man and mdoc macros: their arguments are words of the text."""
        if name in _FONT_MACROS or name in _MDOC_INLINE:
            self._words_if_any(self.inline(self.mdoc_or_plain(name, rest)))
        elif len(name) == 2 and name[0] in "BIR" and name[1] in "BIR":  # .BR .IR .RB ...: alternating fonts
            self._words_if_any(self.inline("".join(_args(rest))))
        elif name in ("UR", "MT"):
            self._words_if_any(self.inline(rest))
        elif name == "OP":
            self.words(self.inline("[" + " ".join(_args(rest)) + "]"))
        elif name not in _DROP and not name.startswith(("\\", "T{", "T}")):
            # an unknown macro (a page's own, defined in the part skipped): its words still count
            self._words_if_any(self.inline(" ".join(_args(rest))))

    def _words_if_any(self, text: str) -> None:
        """A macro's words (.B with nothing after it sets the font of the next line: no break)."""
        if text.strip():
            self.words(text)

    def mdoc_or_plain(self, name: str, rest: str) -> str:
        a = _args(rest)
        if name in ("B", "I", "SM", "SB"):
            return " ".join(a)
        if name == "Nm":
            if a:
                self.strings.setdefault("__name", a[0])
                return _mdoc_text(a)
            return self.strings.get("__name", "")
        if name == "Nd":
            return "- " + _mdoc_text(a)
        return _mdoc_text([name, *a])

    def table_row(self, raw: str) -> None:
        if self.table_format:  # options and format lines, up to the one ending in "."
            tab = re.search(r"tab\s*\((.)\)", raw)
            if tab:
                self.table_tab = tab.group(1)
            if raw.rstrip().endswith("."):
                self.table_format = False
            return
        if raw.strip() in ("_", "=", "T}", ""):
            return
        cells = [self.inline(c.replace("T{", "").replace("T}", "")).strip() for c in raw.split(self.table_tab)]
        self.emit_line("  ".join(c for c in cells if c))

    def inline(self, text: str) -> str:
        """Escapes resolved: special characters and strings kept, the rest dropped."""
        if "\\" not in text:
            return text
        cut = text.find('\\"')
        if cut >= 0 and not text[:cut].endswith("\\"):
            text = text[:cut]
        return _ESCAPE.sub(self._escape, text)

    def _escape(self, m: re.Match) -> str:
        if m.group("special"):
            return _special(m.group("special"))
        if m.group("string"):
            name = m.group("string")[1:]
            name = name[1:-1] if name.startswith("[") else name[1:] if name.startswith("(") else name
            return self.strings.get(name.split(" ")[0], "")
        if m.group("char"):
            try:
                return chr(int(m.group("char")[2:-1]))
            except (ValueError, OverflowError):
                return ""
        if m.group("other"):
            c = m.group("other")
            return _OTHER.get(c, c)
        return ""


def _args(rest: str) -> list[str]:
    """A macro's arguments: words, or "quoted strings" ("" inside is a quote)."""
    return [m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2) for m in _ARG.finditer(rest)]


def _mdoc_text(args: list[str]) -> str:
    """An mdoc line's words without its macro names: '.Op Fl v Ar file' -> '[-v file]'."""
    out: list[str] = []
    closers: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in _MDOC_QUOTES:
            o, c = _MDOC_QUOTES[a]
            out.append(o)
            closers.append(c)
        elif a == "Fl":
            nxt = args[i + 1] if i + 1 < len(args) and args[i + 1] not in _MDOC_INLINE else ""
            out.append("-" + nxt)
            i += 1 if nxt else 0
        elif a == "Xr" and i + 2 < len(args) + 1 and i + 1 < len(args):
            page = args[i + 1]
            section = args[i + 2] if i + 2 < len(args) and args[i + 2] not in _MDOC_INLINE else ""
            out.append(f"{page}({section})" if section else page)
            i += 2 if section else 1
        elif a in _MDOC_WORDS:
            out.append(_MDOC_WORDS[a])
        elif a in _MDOC_INLINE:
            pass
        else:
            out.append(a)
        i += 1
    text = " ".join(out) + "".join(reversed(closers))
    text = re.sub(r" (?!\.\.)([,.;:)\]”’⟩}])", r"\1", text)  # "file ..." keeps its space
    return re.sub(r"([\[(“‘⟨{]) ", r"\1", text)


def _special(spec: str) -> str:
    """The character of ``\\(xx``, ``\\[name]`` (``u00E4``, ``u0061_0308``, ``:a``) or ``\\C'name'``."""
    name = spec[1:] if spec.startswith("(") else spec[1:-1] if spec.startswith("[") else spec[2:-1]
    if name in _SPECIAL:
        return _SPECIAL[name]
    if len(name) == 2 and name[0] in _ACCENTS and name[1].isalpha():
        return unicodedata.normalize("NFC", name[1] + _ACCENTS[name[0]])
    if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}(_[0-9A-Fa-f]{4,6})*", name):
        try:
            return unicodedata.normalize("NFC", "".join(chr(int(p.lstrip("u"), 16)) for p in name.split("_")))
        except (ValueError, OverflowError):
            return ""
    if name.startswith("char") and name[4:].isdigit():
        return chr(int(name[4:])) if int(name[4:]) < 0x110000 else ""
    return ""
