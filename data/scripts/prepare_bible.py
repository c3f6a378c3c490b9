#!/usr/bin/env python3
"""Builds Tern's bundled Spanish->English parallel corpus from Debian's SWORD Bible modules.

Source: spaRV1909eb (Reina-Valera 1909) and engWEB2015eb (World English Bible), both in the KJV
versification, exported with diatheke in OSIS form (one verse per line, words in <w> tags, Strong's
numbers only in attributes). Verses are aligned by book/chapter/verse, cleaned, and split by whole
books so that no held-out book has a single verse in train:

  dev:      Ruth, Jonah, Philippians, Jude
  test:     Joel, Nahum, Colossians, I Peter
  reserved: Habakkuk, Zephaniah, Song of Solomon, Galatians, James, II John, III John
            (never used by Tern itself; kept for outside evaluation)
  train:    the other 47 books of the Protestant canon (the WEB's deuterocanon is skipped).

Writes OUTDIR/{train,dev,test,reserved}.{es,en} (line-aligned, UTF-8), OUTDIR/<split>.ids (the
"Book C:V" of each line) and OUTDIR/manifest.json (counts and SHA-256 of every file). A second run
with the same outputs in place does nothing unless --force. Standard library only.

What the cleaning handles (seen in real diatheke output, not guessed):
  - diatheke carries the last psalm title forward as a prefix of every later verse, even into
    Titus; every prefix is dropped and the real titles are fetched one psalm at a time, then put
    at the start of English verse 1, where the RV1909 has its titles.
  - Words glued where the module's markup has no space ("God</w><w>created", "allí</w>también"),
    except Spanish enclitic pronouns ("sáca</w>lo" -> "sácalo").
  - Drop-capital words at chapter starts in the RV1909 ("EN el principio" -> "En el principio")
    and the Hebrew letters heading each stanza of Psalm 119 ("ALEPH.", "BETH").
  - The subscriptions the RV1909 appends to an epistle's last verse ("Escrita de Roma ...") and
    the glossary the WEB appends to Revelation 22:21.
  - Markup, the module-name line at the end, and runs of whitespace.
Pairs whose lengths differ by more than MAX_LENGTH_RATIO are dropped: in this corpus they are
verses one translation moved into a neighbouring verse.
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

VERSION = 2  # Bump when the output for the same modules changes; forces a rebuild.

ES_MODULE = "spaRV1909eb"
EN_MODULE = "engWEB2015eb"

# The 66 books in canonical order, as diatheke's English locale names them.
CANON = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "I Samuel", "II Samuel", "I Kings", "II Kings", "I Chronicles", "II Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon", "Isaiah",
    "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah",
    "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi", "Matthew", "Mark",
    "Luke", "John", "Acts", "Romans", "I Corinthians", "II Corinthians", "Galatians", "Ephesians",
    "Philippians", "Colossians", "I Thessalonians", "II Thessalonians", "I Timothy", "II Timothy",
    "Titus", "Philemon", "Hebrews", "James", "I Peter", "II Peter", "I John", "II John",
    "III John", "Jude", "Revelation of John"
]
# The WEB's deuterocanon (KJVA versification): recognised so its verses are counted as dropped.
DEUTEROCANON = [
    "Tobit", "Judith", "Esther (Greek)", "Wisdom", "Sirach", "Baruch", "Prayer of Azariah",
    "Susanna", "Bel and the Dragon", "Dragon", "I Maccabees", "II Maccabees", "III Maccabees",
    "IV Maccabees", "I Esdras", "II Esdras", "Prayer of Manasses", "Additional Psalm"
]
HELD_OUT = {
    "dev": ["Ruth", "Jonah", "Philippians", "Jude"],
    "test": ["Joel", "Nahum", "Colossians", "I Peter"],
    "reserved": [
        "Habakkuk", "Zephaniah", "Song of Solomon", "Galatians", "James", "II John", "III John"
    ],
}
SPLITS = ["train", "dev", "test", "reserved"]
# A pair whose sides differ in length by more than this factor (in characters) is misaligned:
# in this corpus that is a verse whose text the WEB moved into its neighbour.
MAX_LENGTH_RATIO = 3.0
MIN_CHARS_FOR_RATIO = 20

BOOK_PATTERN = "|".join(re.escape(b) for b in sorted(CANON + DEUTEROCANON, key=len, reverse=True))
# The first "Book C:V: " on a line starts a verse; anything before it is a (stale) heading.
VERSE_KEY = re.compile(r"(?:^|(?<=\s)|(?<=>))(" + BOOK_PATTERN + r") (\d+):(\d+): ")
TAG = re.compile(r"<[^>]*>")
WORD = re.compile(r"[^\W\d_]{2,}")  # a word of two letters or more
SENTENCE_START = re.compile(r"(|.*[.:!?] )[¡¿“‘(]*", flags=re.S)
WORD_ANY = re.compile(r"[^\W\d_]+")
ENCLITIC_MARK = "\x00"
MARKED = re.compile(r"([^\W\d_]+)\x00([^\W\d_]+)")
W_TAG = re.compile(r"</?w(?:\s[^>]*)?>")
SPANISH_ENCLITICS = {
    "lo", "la", "le", "los", "las", "les", "me", "te", "se", "nos", "os", "selo", "sela", "selos",
    "selas", "melo", "mela", "telo", "tela"
}
# Closing punctuation that a word glued to it ("said.”Then") should be separated from.
CLOSERS = set(".,;:!?”)»")


class Progress:
    """One rewritten status line on stderr, only when stderr is a terminal."""

    def __init__(self):
        self.enabled = sys.stderr.isatty()

    def show(self, text):
        if self.enabled:
            sys.stderr.write("\r\x1b[K" + text)
            sys.stderr.flush()

    def done(self):
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def fail(message):
    sys.stderr.write("prepare_bible: error: %s\n" % message)
    sys.exit(1)


def run_diatheke(diatheke, module, key, fmt="OSIS"):
    cmd = [diatheke, "-b", module, "-f", fmt, "-l", "en", "-k", key]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except FileNotFoundError:
        fail("%s not found; install Debian's diatheke (scripts/install-deps.sh)" % diatheke)
    text = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0 or not VERSE_KEY.search(text):
        fail("'%s' gave no verses (exit %d); is the SWORD module %s installed "
             "(sword-text-sparv / sword-text-web)? %s" %
             (" ".join(cmd), proc.returncode, module, proc.stderr.decode(errors="replace").strip()))
    return text


def parse_export(text):
    """Returns {(book, chapter, verse): raw OSIS text} and the stale heading prefix of each verse."""
    verses = collections.OrderedDict()
    prefixes = {}
    last = None
    for line in text.split("\n"):
        m = VERSE_KEY.search(line)
        if m is None:
            # The "(module)" line at the end, or a verse continued on a new line.
            if last is not None and line.strip() and not re.fullmatch(r"\(\w+\)", line.strip()):
                verses[last] += " " + line
            continue
        last = (m.group(1), int(m.group(2)), int(m.group(3)))
        prefixes[last] = line[:m.start()]
        verses[last] = line[m.end():]
    return verses, prefixes


def join_segments(osis, spanish):
    """Strips the <w> markup, putting back the spaces the module lost at tag boundaries.

    In Spanish, a pronoun glued to the word before ("sáca</w>lo") may be an enclitic ("sácalo")
    or a lost space ("éste</w>le dijo"); it is marked with ENCLITIC_MARK for EncliticJoiner.
    """
    segments = W_TAG.split(osis)
    out = ""
    for seg in segments:
        seg = TAG.sub("", seg)
        if not seg:
            continue
        if out and not out[-1].isspace() and not seg[0].isspace():
            left, right = out[-1], seg[0]
            if right.isalnum() and (left.isalnum() or left in CLOSERS or
                                    (left == "’" and len(out) > 1 and not out[-2].isalnum())):
                enclitic = re.match(r"[^\W\d_]+", seg)
                glued_pronoun = (spanish and left.isalpha() and enclitic and
                                 enclitic.group(0).lower() in SPANISH_ENCLITICS and
                                 not seg[enclitic.end():enclitic.end() + 1].isalnum())
                out += ENCLITIC_MARK if glued_pronoun else " "
        out += seg
    return out


class EncliticJoiner:
    """Decides each ENCLITIC_MARK from how the corpus uses the word before it.

    Joined when the word before ends like an infinitive or imperative ("pagar|la", "Dad|nos"),
    never stands alone elsewhere ("sáca|lo", "díjo|le"), or the joined form occurs elsewhere;
    otherwise a space ("éste|le", "Jehová|los").
    """

    def __init__(self, texts):
        self.words = collections.Counter()
        marked_left = collections.Counter()
        for t in texts:
            self.words.update(WORD_ANY.findall(t.replace(ENCLITIC_MARK, " ")))
            marked_left.update(m.group(1) for m in MARKED.finditer(t))
        for word, n in marked_left.items():
            self.words[word] -= n  # count only the word's other, standalone uses

    def resolve(self, text):
        if ENCLITIC_MARK not in text:
            return text

        def decide(m):
            left, right = m.group(1), m.group(2)
            join = (left[-1] in "rd" or self.words[left] <= 0 or self.words[left + right] > 0)
            return left + ("" if join else " ") + right

        return MARKED.sub(decide, text)


def normalize_space(text):
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\u00a0", " ").replace("\u00b6", " ")  # no-break space, pilcrow
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([,;:.!?])(?=\s|$)", r"\1", text)  # "word ," left by dropped markup
    text = re.sub(r"([,;:!?])(?=[^\W\d_])", r"\1 ", text)  # "desolation,spoken"
    return text


class DropCapFixer:
    """Rewrites the RV1909's capitals at a chapter's start as ordinary text.

    The run of capitalised words that opens a sentence ("EN el", "Y ACONTECIÓ", "HE AQUÍ que",
    "Y Á SUS discípulos", "Salmo de David. DE Jehová") becomes: its first word capitalised, the
    others in the form the corpus uses most often mid-sentence ("aconteció", "á", "David").
    Longer runs are inscriptions ("ESTE ES JESUS EL REY DE LOS JUDIOS") and stay.
    """

    MAX_RUN = 4

    def __init__(self, texts):
        self.counts = collections.Counter()
        for t in texts:
            for m in re.finditer(r"(?<=[^\W\d_]) ([^\W\d_]+)", t):  # a word after a word
                self.counts[m.group(1)] += 1

    def _usual_form(self, word):
        capital, lower = self.counts[word.capitalize()], self.counts[word.lower()]
        return word.capitalize() if capital > lower else word.lower()

    def fix(self, text):
        tokens = list(re.finditer(r"\S+", text))
        letters = [re.sub(r"[\W\d_]", "", t.group(0)) for t in tokens]
        caps = [bool(w) and w.isupper() for w in letters]
        first = next((i for i, w in enumerate(letters) if len(w) >= 2 and caps[i]), None)
        if first is None:
            return text
        start = first
        while start > 0 and caps[start - 1] and len(letters[start - 1]) == 1:
            start -= 1
        end = first + 1
        while end < len(tokens) and caps[end]:
            end += 1
        if end - start > self.MAX_RUN or end == len(tokens) or not letters[end]:
            return text
        if not SENTENCE_START.fullmatch(text[:tokens[start].start()]):
            return text
        out = [text[:tokens[start].start()]]
        for i in range(start, end):
            initial = [i == start]

            def recase(m):
                word = m.group(0)
                new = word.capitalize() if initial[0] else self._usual_form(word)
                initial[0] = False
                return new

            out.append(WORD_ANY.sub(recase, tokens[i].group(0)))
            out.append(text[tokens[i].end():tokens[i + 1].start()] if i + 1 < len(tokens) else "")
        out.append(text[tokens[end].start():])
        return "".join(out)


def fetch_psalm_titles(diatheke):
    """{chapter: English title} of the psalms that have one.

    diatheke repeats the last title before every later verse, so a title is taken only where it
    differs from the previous verse's. The raw ("internal") form keeps each title's unique <lg sID>
    next to it, so two psalms with the same words ("A Song of Ascents.") still differ.
    """
    _, prefixes = parse_export(run_diatheke(diatheke, EN_MODULE, "Psalms", "internal"))
    titles, previous = {}, ""
    for (book, chapter, verse), prefix in prefixes.items():
        if book == "Psalms" and verse == 1 and prefix.strip() and prefix != previous:
            found = re.findall(r"<title[^>]*>(.*?)</title>", prefix)
            titles[chapter] = normalize_space(TAG.sub("", " ".join(found)))
        previous = prefix
    return titles


def clean_spanish(key, raw, fixer, last_verse):
    book, chapter, verse = key
    text = raw
    if key == last_verse.get(book):
        # The KJV-tradition subscription of an epistle: "... Amén. Escrita de Roma á los Efesios."
        text = re.sub(r"(\bAmén\.) [^.]*\b(?:[Ee]scrita|[Ee]nviada)\b.*$", r"\1", text)
    if book == "Psalms" and chapter == 119 and verse % 8 == 1:
        text = re.sub(r"^[A-Z]{2,}\.? ", "", text)  # stanza letter: ALEPH., BETH, ...
    if verse == 1 or (book == "Psalms" and chapter == 119 and verse % 8 == 1):
        text = fixer.fix(text)
    return text


def build(args, progress):
    progress.show("prepare-corpus: exporting %s and %s with diatheke" % (ES_MODULE, EN_MODULE))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        es_future = pool.submit(run_diatheke, args.diatheke, ES_MODULE, "Gen-Rev")
        en_future = pool.submit(run_diatheke, args.diatheke, EN_MODULE, "Gen-Rev")
        es_raw, _ = parse_export(es_future.result())
        en_raw, _ = parse_export(en_future.result())

    progress.show("prepare-corpus: cleaning")
    es = {k: join_segments(v, True) for k, v in es_raw.items()}
    joiner = EncliticJoiner(es.values())
    es = {k: normalize_space(joiner.resolve(v)) for k, v in es.items()}
    en = {k: normalize_space(join_segments(v, False)) for k, v in en_raw.items()}
    fixer = DropCapFixer(es.values())
    last_verse = {k[0]: k for k in es}  # keys come in canonical order
    es = {k: normalize_space(clean_spanish(k, v, fixer, last_verse)) for k, v in es.items()}
    # The WEB's glossary is appended to its last verse.
    key = ("Revelation of John", 22, 21)
    if key in en:
        en[key] = en[key].split(" The following words used in the World English Bible")[0]

    progress.show("prepare-corpus: psalm titles")
    titles = fetch_psalm_titles(args.diatheke)
    for chapter, title in titles.items():
        key = ("Psalms", chapter, 1)
        # Psalm 119's title is only its first stanza letter, which the Spanish loses above.
        if title and key in en and not re.fullmatch(r"[A-Z]+", title):
            en[key] = title + " " + en[key]

    split_of = {b: s for s, books in HELD_OUT.items() for b in books}
    order = {b: i for i, b in enumerate(CANON)}
    dropped = collections.Counter()
    pairs = {s: [] for s in SPLITS}
    for key in sorted(set(es) | set(en), key=lambda k: (order.get(k[0], 1 << 30), k[1], k[2])):
        if key[0] not in order:
            dropped["deuterocanonical"] += 1
            continue
        if key not in es:
            dropped["missing_es"] += 1
            continue
        if key not in en:
            dropped["missing_en"] += 1
            continue
        s, e = es[key], en[key]
        if not s or not e:
            dropped["empty"] += 1
            continue
        if min(len(s), len(e)) >= MIN_CHARS_FOR_RATIO and max(len(s), len(e)) > \
                MAX_LENGTH_RATIO * min(len(s), len(e)):
            dropped["length_ratio"] += 1
            continue
        if min(len(s), len(e)) < MIN_CHARS_FOR_RATIO and max(len(s), len(e)) > 4 * \
                MIN_CHARS_FOR_RATIO:
            dropped["length_ratio"] += 1
            continue
        ident = "%s %d:%d" % key
        pairs[split_of.get(key[0], "train")].append((ident, s, e))

    # Held-out sentences also found in other books (Psalm 14 is Psalm 53, II Peter echoes Jude)
    # must not be learnt in train.
    held_es = {s for split in SPLITS[1:] for (_, s, _) in pairs[split]}
    held_en = {e for split in SPLITS[1:] for (_, _, e) in pairs[split]}
    kept = []
    for item in pairs["train"]:
        if item[1] in held_es or item[2] in held_en:
            dropped["overlaps_held_out"] += 1
        else:
            kept.append(item)
    pairs["train"] = kept
    return pairs, dropped


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def output_files():
    return ["%s.%s" % (s, ext) for s in SPLITS for ext in ("es", "en", "ids")]


def is_complete(outdir):
    try:
        with open(os.path.join(outdir, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("version") != VERSION:
            return None
        for name in output_files():
            if sha256(os.path.join(outdir, name)) != manifest["sha256"][name]:
                return None
        return manifest
    except (OSError, ValueError, KeyError):
        return None


def write_outputs(outdir, pairs, dropped):
    parent = os.path.dirname(os.path.abspath(outdir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".prepare-corpus.", dir=parent)
    os.chmod(tmp, 0o755)
    try:
        manifest = {"version": VERSION, "source": [ES_MODULE, EN_MODULE], "counts": {},
                    "dropped": dict(sorted(dropped.items())), "books": HELD_OUT, "sha256": {}}
        for split in SPLITS:
            columns = {"ids": [p[0] for p in pairs[split]], "es": [p[1] for p in pairs[split]],
                       "en": [p[2] for p in pairs[split]]}
            for ext, lines in columns.items():
                name = "%s.%s" % (split, ext)
                with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="\n") as f:
                    f.writelines(line + "\n" for line in lines)
                manifest["sha256"][name] = sha256(os.path.join(tmp, name))
            manifest["counts"][split] = len(pairs[split])
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
        if os.path.isdir(outdir):
            old = outdir.rstrip("/") + ".old.%d" % os.getpid()
            os.rename(outdir, old)
            os.rename(tmp, outdir)
            shutil.rmtree(old)
        else:
            os.rename(tmp, outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def report(outdir, manifest, skipped):
    c = manifest["counts"]
    state = "up to date, nothing to do (use --force to rebuild)" if skipped else "written"
    print("prepare-corpus: %s %s" % (outdir, state))
    print("  pairs: " + " ".join("%s=%d" % (s, c[s]) for s in SPLITS))
    print("  dropped: " + (" ".join("%s=%d" % kv for kv in sorted(manifest["dropped"].items()))
                           or "none"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("outdir", nargs="?", default=os.path.join(repo_root, "corpus", "bible"),
                        help="output folder (default: corpus/bible in the repository)")
    parser.add_argument("--force", action="store_true", help="rebuild even if outputs are complete")
    parser.add_argument("--diatheke", default="diatheke", help="path of the diatheke program")
    args = parser.parse_args()

    manifest = None if args.force else is_complete(args.outdir)
    if manifest is not None:
        report(args.outdir, manifest, skipped=True)
        return
    progress = Progress()
    pairs, dropped = build(args, progress)
    progress.show("prepare-corpus: writing %s" % args.outdir)
    manifest = write_outputs(args.outdir, pairs, dropped)
    progress.done()
    report(args.outdir, manifest, skipped=False)


if __name__ == "__main__":
    main()
