"""Cut a document into chunks that fit the encoder's window, at the best boundaries available.

The text is split into paragraphs at blank lines, and each paragraph is counted once. Only a
paragraph that is longer than the window, or inside which a chunk has to end, is split further
into *atoms* at sentence and line breaks (a regex pass; the CJK marks 。！？ count even without
a following space), each counted once. An atom longer than the window is cut into word-sized
pieces (CJK: between characters), each counted once; a piece that still does not fit is cut by
binary search inside itself. So no count ever runs over the rest of the document, and the
tokenizer sees each character about twice (once in its atom, once when the chunk is verified).

Packing is greedy: where the window fills up, the chunk ends at the latest paragraph break that
keeps it at least half full, else the latest sentence break, else a line break, else a word
break (then ``cut`` is True). A chunk's count is estimated as the sum of its atoms' counts and
verified with the real ``count_tokens``; the verified count is what ``Chunk.tokens`` holds.

Overlap: when a chunk ends inside a paragraph, the next chunk starts with the last whole
sentences of the previous one that fit in ``overlap_tokens`` (or, if the last sentence alone is
longer, with its last words), never more than half of that chunk. A paragraph break is a natural
seam, so no overlap is added there.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hefsearch.readers.extract import ExtractedText

# Break levels, weakest to strongest; the level of an atom is that of the break after it.
CHAR, WORD, LINE, SENTENCE, PARAGRAPH, END = range(6)
# A chunk may end at a weaker break than the best one when that keeps it at least this full.
MIN_FILL = 0.5
# Longest chunk in characters per token of room (about 4x what real text needs).
MAX_CHARS_PER_TOKEN = 16

_SENTENCE_MARKS = ".!?…‽؟।"
_CJK_SENTENCE_MARKS = "。！？｡"
_CLOSERS = "\"'”’»)]」』〉》）"
_BREAKS = re.compile(
    rf"(?P<sent>[{re.escape(_SENTENCE_MARKS)}][{re.escape(_CLOSERS)}]*)(?P<sgap>\s+)"
    rf"|(?P<cjk>[{_CJK_SENTENCE_MARKS}][{re.escape(_CLOSERS)}]*)(?P<cgap>\s*)"
    r"|(?P<lgap>[^\S\n]*\n\s*)"
)
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
_SPACE = re.compile(r"\s+")
# Scripts written without spaces: a break between two of these characters is a word break.
_NO_SPACE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f]")


@dataclass(frozen=True)
class Chunk:
    ordinal: int  # 0.. within the document
    text: str
    start: int  # char span in ExtractedText.text: text == doc.text[start:end]
    end: int
    page: int | None  # PDF page of `start`
    tokens: int  # tokens incl. specials (as count_tokens says)
    cut: bool  # True when the chunk had to be cut inside a sentence/word to fit


@dataclass
class _Atom:
    start: int
    end: int
    level: int  # strength of the break after this atom
    tokens: int  # tokens of the atom alone, without the specials/prefix
    refinable: bool = False  # a whole paragraph whose sentences have not been counted yet


def chunk_text(
    doc: ExtractedText,
    count_tokens: Callable[[str], int],
    max_tokens: int,
    overlap_tokens: int = 32,
) -> list[Chunk]:
    """Chunks of ``doc`` with ``count_tokens(chunk.text) <= max_tokens`` each.

    :param count_tokens: tokens of a text including specials and prefix (``Encoder.count_tokens``).
    :param max_tokens: the encoder window (``Encoder.max_tokens``).
    :param overlap_tokens: how much of the previous chunk a chunk may repeat, in tokens; capped
        at half the room in the window.
    """
    return _Chunker(doc, count_tokens, max_tokens, overlap_tokens).run()


class _Chunker:
    def __init__(self, doc: ExtractedText, count_tokens, max_tokens: int, overlap_tokens: int):
        self.text = doc.text
        self.count = count_tokens
        self.max = int(max_tokens)
        self.base = count_tokens("")  # specials + prefix
        room = self.max - self.base
        if room < 1:
            raise ValueError(f"max_tokens={max_tokens} leaves no room for text after {self.base} special/prefix tokens")
        self.overlap = max(0, min(int(overlap_tokens), room // 2))
        # Caps a chunk's length in characters too: a window of [UNK]s could otherwise swallow
        # megabytes of one unbroken "word".
        self.max_chars = MAX_CHARS_PER_TOKEN * room
        self.page_starts: list[int] = []
        self.page_numbers: list[int] = []
        for number, start, _end in doc.pages or ():
            self.page_starts.append(start)
            self.page_numbers.append(number)

    # -- atoms -------------------------------------------------------------------------------

    def paragraphs(self) -> Iterator[_Atom]:
        """Paragraph atoms, each counted once; paragraphs too long for the window come as
        their sentence atoms right away, the others are refined only if a chunk must end
        inside them (see run)."""
        pos = 0
        for m in _PARAGRAPH_BREAK.finditer(self.text):
            yield from self._paragraph(pos, m.start())
            pos = m.end()
        yield from self._paragraph(pos, len(self.text))

    def _paragraph(self, start: int, end: int) -> list[_Atom]:
        start, end = self._strip(start, end)
        if start >= end:
            return []
        if end - start <= self.max_chars:
            tokens = self.count(self.text[start:end])
            if tokens <= self.max:
                return [_Atom(start, end, PARAGRAPH, tokens - self.base, refinable=True)]
        return self.sentences(start, end, PARAGRAPH)

    def sentences(self, start: int, end: int, level: int) -> list[_Atom]:
        """Atoms of the text between start and end at sentence and line breaks, each counted."""
        atoms: list[_Atom] = []
        pos = start
        for m in _BREAKS.finditer(self.text, start, end):
            if m.group("sent") is not None:
                gap_start, gap_level = m.start("sgap"), SENTENCE
            elif m.group("cjk") is not None:
                gap_start, gap_level = m.start("cgap"), SENTENCE
            else:
                gap_start, gap_level = m.start("lgap"), LINE
            self._add_atom(atoms, pos, gap_start, gap_level)
            pos = m.end()
        self._add_atom(atoms, pos, end, level)
        if atoms:
            atoms[-1].level = level
        return atoms

    def _add_atom(self, atoms: list[_Atom], start: int, end: int, level: int) -> None:
        start, end = self._strip(start, end)
        if start >= end:
            if atoms:  # a break with nothing after it: keep the stronger one
                atoms[-1].level = max(atoms[-1].level, level)
            return
        if end - start <= self.max_chars:
            tokens = self.count(self.text[start:end])
            if tokens <= self.max:
                atoms.append(_Atom(start, end, level, tokens - self.base))
                return
        atoms.extend(self._split_long(start, end, level))

    def _strip(self, start: int, end: int) -> tuple[int, int]:
        text = self.text
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        return start, end

    def _split_long(self, start: int, end: int, level: int) -> list[_Atom]:
        """Word-sized pieces of an atom that does not fit, each counted once (so the whole atom
        is tokenized about once), cut at spaces where possible; a piece that still does not fit
        (more than one token per character) is cut by binary search within itself."""
        text, count = self.text, self.count
        target = max(8, min(self.max - self.base, self.max_chars))  # chars per piece
        pieces: list[_Atom] = []
        pos = start
        while pos < end:
            stop = min(pos + target, end)
            if stop < end:
                cut, after, cut_level = self._word_cut(pos, stop, end)
            else:
                cut, after, cut_level = end, end, level
            tokens = count(text[pos:cut])
            if tokens <= self.max:
                pieces.append(_Atom(pos, cut, cut_level, tokens - self.base))
            else:
                p = pos
                while p < cut:
                    piece_end, p_next, piece_level, piece_tokens = self._longest_fit(p, cut)
                    pieces.append(_Atom(p, piece_end, piece_level, piece_tokens - self.base))
                    p = p_next
                pieces[-1].level = cut_level
            pos = after
        pieces[-1].level = level
        return pieces

    def _word_cut(self, pos: int, stop: int, end: int) -> tuple[int, int, int]:
        """Where to end a piece that must stop by `stop`: (end, next start, break level)."""
        text = self.text
        last_gap = None
        for m in _SPACE.finditer(text, pos, stop + 1):
            if m.start() > pos:
                last_gap = m
        if last_gap is not None and (last_gap.start() >= pos + (stop - pos) // 4 or last_gap.end() > stop):
            return last_gap.start(), self._strip(last_gap.end(), end)[0], WORD
        if _NO_SPACE_SCRIPT.match(text, stop - 1) or _NO_SPACE_SCRIPT.match(text, stop):
            return stop, stop, WORD
        while stop - 1 > pos and unicodedata.combining(text[stop]):
            stop -= 1  # do not separate a letter from its accent
        return stop, stop, CHAR

    def _longest_fit(self, pos: int, end: int) -> tuple[int, int, int, int]:
        """(piece end, next piece start, break level, tokens) for the longest fitting piece at pos."""
        text, count, limit = self.text, self.count, self.max
        window = max(64, 4 * (limit - self.base))
        good, good_tokens = pos, self.base
        bad = None
        while True:  # grow the window until it overflows (or the atom ends)
            probe = min(pos + window, end)
            tokens = count(text[pos:probe])
            if tokens <= limit:
                good, good_tokens = probe, tokens
                if probe == end:
                    return end, end, END, tokens
                window *= 2
            else:
                bad = probe
                break
        while bad - good > 1:  # largest fitting end, assuming counts grow with length
            mid = (good + bad) // 2
            tokens = count(text[pos:mid])
            if tokens <= limit:
                good, good_tokens = mid, tokens
            else:
                bad = mid
        if good == pos:  # not even one character fits (cannot happen with room >= 1 token)
            good = pos + 1
            good_tokens = count(text[pos:good])
        if unicodedata.combining(text[good]):
            while good - 1 > pos and unicodedata.combining(text[good]):
                good -= 1  # do not separate a letter from its accent
            good_tokens = count(text[pos:good])
        # Prefer the last word boundary in the second half of the fitting span.
        span = text[pos:good + 1]
        last_gap = None
        for m in _SPACE.finditer(span):
            if m.start() > 0:
                last_gap = m
        if last_gap is not None and last_gap.start() >= (good - pos) // 2:
            cut_end = pos + last_gap.start()
            tokens = count(text[pos:cut_end])
            if tokens <= limit:
                return cut_end, self._strip(cut_end, end)[0], WORD, tokens
        level = WORD if _NO_SPACE_SCRIPT.match(text, good - 1) or _NO_SPACE_SCRIPT.match(text, good) else CHAR
        cut_end = self._strip(pos, good)[1]
        if cut_end != good:
            level = WORD
            good_tokens = count(text[pos:cut_end])
        return cut_end, self._strip(good, end)[0], level, good_tokens

    # -- packing -----------------------------------------------------------------------------

    def run(self) -> list[Chunk]:
        source = self.paragraphs()
        exhausted = False
        buf: list[_Atom] = []  # atoms from the current chunk's first atom on
        chunks: list[Chunk] = []
        head: tuple[int, int] | None = None  # (start, tokens) of the overlap carried into buf[0]
        enough = MIN_FILL * self.max
        while True:
            if not buf and not exhausted:
                nxt = next(source, None)
                if nxt is None:
                    exhausted = True
                else:
                    buf.append(nxt)
            if not buf:
                return chunks
            start = head[0] if head else buf[0].start
            total = self.base + (head[1] if head else 0)
            j, sums, exhausted = self._fill(buf, source, exhausted, start, total, enough)
            if j == 0:  # the overlap leaves no room for the next atom: drop the overlap
                if head is None:  # cannot happen: every atom fits alone by construction
                    raise AssertionError("atom does not fit the window")
                head = None
                continue
            k, tokens = self._verified_end(buf, start, self._choose_end(buf, 0, j - 1, sums))
            if tokens > self.max:
                if head is not None:
                    head = None
                    continue
                raise AssertionError("atom does not fit the window")  # pragma: no cover
            end = buf[k].end
            level = buf[k].level
            chunks.append(
                Chunk(
                    ordinal=len(chunks),
                    text=self.text[start:end],
                    start=start,
                    end=end,
                    page=self._page(start),
                    tokens=tokens,
                    cut=level <= WORD,
                )
            )
            head = self._overlap(buf, k, start) if level < PARAGRAPH else None
            del buf[:k + 1]

    def _fill(self, buf: list[_Atom], source, exhausted: bool, start: int, total: int,
              enough: float) -> tuple[int, list[int], bool]:
        """How many atoms of ``buf`` (taking more from ``source`` as needed, splitting a
        paragraph into sentences where the chunk must end inside it) fit the window from
        ``start``: (that number, the running token totals, whether ``source`` is exhausted)."""
        sums: list[int] = []
        j = 0
        while True:
            if j == len(buf):
                nxt = None if exhausted else next(source, None)
                if nxt is None:
                    exhausted = True
                    buf[-1].level = END
                    break
                buf.append(nxt)
            atom = buf[j]
            if total + atom.tokens <= self.max and atom.end - start <= self.max_chars:
                total += atom.tokens
                sums.append(total)
                j += 1
                continue
            if atom.refinable and (j == 0 or sums[-1] < enough):
                # The chunk has to end inside this paragraph: count its sentences now.
                atom.refinable = False
                buf[j:j + 1] = self.sentences(atom.start, atom.end, atom.level)
                continue
            break
        return j, sums, exhausted

    def _verified_end(self, buf: list[_Atom], start: int, k: int) -> tuple[int, int]:
        """(k, tokens): the estimate checked by the real count, stepping back while it does
        not fit (the real count decides)."""
        while True:
            tokens = self.count(self.text[start:buf[k].end])
            if tokens <= self.max or k == 0:
                return k, tokens
            k -= 1

    def _choose_end(self, atoms: list[_Atom], i: int, last: int, sums: list[int]) -> int:
        if atoms[last].level == END:
            return last
        enough = MIN_FILL * self.max
        for level in (PARAGRAPH, SENTENCE, LINE, WORD):
            for k in range(last, i - 1, -1):
                if sums[k - i] < enough:
                    break
                if atoms[k].level >= level:
                    return k
        return last

    def _overlap(self, atoms: list[_Atom], k: int, chunk_start: int) -> tuple[int, int] | None:
        """Start and tokens of the tail of the chunk ending with atom k to repeat next."""
        if self.overlap <= 0:
            return None
        # Never repeat more than half of the chunk, so every chunk moves on by at least half.
        floor = chunk_start + (atoms[k].end - chunk_start + 1) // 2
        tokens = 0
        m = k
        while m >= 0 and atoms[m].start >= floor and tokens + atoms[m].tokens <= self.overlap:
            tokens += atoms[m].tokens
            m -= 1
        if tokens > 0:
            return atoms[m + 1].start, tokens
        return self._word_tail(atoms[k], floor)

    def _word_tail(self, atom: _Atom, floor: int) -> tuple[int, int] | None:
        """The longest suffix of `atom` starting at a word at or after `floor` that fits in the
        overlap budget."""
        text = self.text
        lo = max(atom.start, floor)
        starts = [m.end() for m in _SPACE.finditer(text, atom.start, atom.end)]
        starts += [p for p in range(lo, atom.end) if _NO_SPACE_SCRIPT.match(text, p)]
        starts = sorted(p for p in set(starts) if lo <= p < atom.end)
        if not starts:
            return None
        # Suffix counts shrink as the start moves right. Guess the start from the atom's token
        # density, then gallop and bisect from there: a few counts of overlap-sized strings.
        guess = atom.end - (atom.end - atom.start) * self.overlap // max(atom.tokens, 1)
        memo: dict[int, int] = {}

        def fits(idx: int) -> bool:
            if idx not in memo:
                memo[idx] = self.count(text[starts[idx]:atom.end]) - self.base
            return memo[idx] <= self.overlap

        idx = min(bisect.bisect_left(starts, guess), len(starts) - 1)
        if fits(idx):  # look left for a longer suffix that still fits
            good, step = idx, 1
            while good - step >= 0 and fits(good - step):
                good -= step
                step *= 2
            bad = max(good - step, -1)
        else:  # look right for the first suffix that fits
            bad, step = idx, 1
            while bad + step < len(starts) and not fits(bad + step):
                bad += step
                step *= 2
            if bad + step >= len(starts) and not fits(len(starts) - 1):
                return None
            good = min(bad + step, len(starts) - 1)
        while good - bad > 1:
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
        return starts[good], memo[good]

    def _page(self, pos: int) -> int | None:
        if not self.page_starts:
            return None
        idx = bisect.bisect_right(self.page_starts, pos) - 1
        return self.page_numbers[max(idx, 0)]
