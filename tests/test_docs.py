"""Every command in the README and docs/ is a real one, and every file they name exists.

Shell blocks: each `hpcgrade …` line resolves to a click command whose options and arguments
parse (click's make_context on the `hpcgrade` group, the command never run; files named as
arguments are examples, so they need not exist), `scripts/…` are executable, `bench/…` exist and
take the options given them, gunicorn's and celery's modules exist, and nothing else runs.
Python blocks: each `%hpcgrade …` line parses as the magic parses it, and each
`from … import …` imports. Inline code: an `hpcgrade …` span names a real command and its
options; a path under a top-level folder exists. Links: their files and headings exist. Needs
no service."""

import importlib
import re
import shlex
from pathlib import Path

import click
import pytest

from hpcgrade.magic import _parser as magic_parser
from worker.cli.main import main as hpcgrade_group
from worker.harness.codes import CATALOGUE

ROOT = Path(__file__).parents[1]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "exercises" / "README.md",
    ROOT / "migrations" / "README.md",
]
# what a shell block may run besides hpcgrade, scripts, benches, gunicorn and celery: a program
# of the system named here is checked by nothing, so each one added is a choice
OTHER_PROGRAMS = {"export"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
TOP_FOLDERS = (
    "server",
    "worker",
    "hpcgrade",
    "deploy",
    "scripts",
    "bench",
    "tests",
    "migrations",
    "exercises",
    "docs",
    "examples",
    ".ci",
)
PATH = re.compile(rf"^(?:{'|'.join(re.escape(f) for f in TOP_FOLDERS)})/[\w./-]*$")
PLACEHOLDERS = re.compile(r"[<>…*\[\]|]")


def hpcgrade_problem(words: list[str], whole: bool = True) -> str | None:
    """Why `hpcgrade WORDS` is not a command line of the real group; None when it is. With
    `whole`, options and arguments are parsed too; else only the command and option names."""
    command, context = hpcgrade_group, click.Context(hpcgrade_group, info_name="hpcgrade")
    try:
        while isinstance(command, click.Group):
            if not words or words[0].startswith("-"):
                return f"hpcgrade {' '.join(words)}: a group needs a subcommand"
            name, command, words = command.resolve_command(context, words)
            context = click.Context(command, info_name=name, parent=context)
        if "--help" in words:
            return None
        if whole:
            command.make_context(context.info_name, list(words), parent=context.parent)
            return None
        known = {o for p in command.params for o in [*p.opts, *p.secondary_opts]}
        unknown = [
            w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known
        ]
        return f"{command.name}: no option {', '.join(unknown)}" if unknown else None
    except click.ClickException as exc:
        return exc.format_message()


def bench_problem(words: list[str]) -> str | None:
    path = ROOT / words[0]
    if not path.is_file():
        return f"{words[0]}: no such bench"
    source = path.read_text()
    missing = [
        w
        for w in words[1:]
        if w.startswith("--") and not re.search(rf"add_argument\(\s*\"{re.escape(w)}\"", source)
    ]
    return f"{words[0]}: no option {', '.join(missing)}" if missing else None


def shell_problem(line: str) -> str | None:
    """Why a line of a shell block is not a command that works here; None when it is."""
    if substituted := re.fullmatch(r'eval "\$\((.+)\)"', line.split("#")[0].strip()):
        return shell_problem(substituted.group(1))
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]
    if not words:
        return None
    missing = [w for w in words if PATH.match(w) and not (ROOT / w).exists()]
    if missing:
        return f"{', '.join(missing)}: no such file or folder"
    program = words[0].removeprefix(".venv/bin/")
    if program == "hpcgrade":
        return hpcgrade_problem(words[1:])
    if program.startswith("scripts/"):
        script = ROOT / program
        if not (script.is_file() and script.stat().st_mode & 0o111):
            return f"{program}: no such executable script"
        # scripts/run hands its arguments to `hpcgrade demo`
        return hpcgrade_problem(["demo", *words[1:]]) if program == "scripts/run" else None
    if program == "python" and len(words) > 1 and words[1].startswith("bench/"):
        return bench_problem(words[1:])
    if program == "gunicorn":
        module, _, factory = next(w for w in words if ":" in w).partition(":")
        return module_problem(module, factory.removesuffix("()"))
    if program == "celery":
        return module_problem(words[words.index("-A") + 1], None)
    return None if program in OTHER_PROGRAMS else f"{program}: not a program the docs may name"


def module_problem(module: str, attribute: str | None) -> str | None:
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.is_file():
        return f"{module}: no such module"
    if attribute and not re.search(
        rf"^(def {attribute}\(|{attribute} = )", path.read_text(), re.MULTILINE
    ):
        return f"{module}: defines no {attribute}"
    return None


def python_problem(line: str) -> str | None:
    """A `%hpcgrade …` line the magic would refuse, or an import of the project that fails."""
    if imported := re.fullmatch(r"from ([\w.]+) import (.+)", line.strip()):
        try:
            module = importlib.import_module(imported.group(1))
        except ImportError as exc:
            return str(exc)
        missing = [n for n in re.split(r",\s*", imported.group(2)) if not hasattr(module, n)]
        return f"{imported.group(1)} has no {', '.join(missing)}" if missing else None
    if not line.startswith("%hpcgrade "):
        return None
    try:
        magic_parser().parse_args(shlex.split(line, comments=True)[1:])
    except (Exception, SystemExit) as exc:
        return f"{line}: {exc}"
    return None


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = FENCE.sub("", document.read_text())
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def link_problem(document: Path, target: str) -> str | None:
    if re.match(r"[a-z]+:", target):
        return None
    file, _, anchor = target.partition("#")
    path = (document.parent / file).resolve() if file else document
    if not path.exists():
        return f"link {target}: no such file"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"link {target}: no such heading"
    return None


def problems(text: str, document: Path) -> list[str]:
    """Everything wrong with the commands, paths and links of one Markdown text."""
    found = []
    for language, block in FENCE.findall(text):
        check = {"bash": shell_problem, "python": python_problem}.get(language)
        found += [check(line) for line in block.splitlines() if check and line.strip()]
    prose = FENCE.sub("", text)
    for span in INLINE.findall(prose):
        if span.startswith("hpcgrade ") and not PLACEHOLDERS.search(span):
            found.append(hpcgrade_problem(shlex.split(span)[1:], whole=False))
        elif PATH.match(span) and not PLACEHOLDERS.search(span) and not (ROOT / span).exists():
            found.append(f"{span}: no such file or folder")
    found += [link_problem(document, target) for target in LINK.findall(INLINE.sub("", prose))]
    return [f"{document.relative_to(ROOT)}: {p}" for p in found if p]


@pytest.fixture(autouse=True)
def example_arguments(monkeypatch):
    """The docs' files are examples (work.py, roster.csv), and nothing may ask for input."""
    monkeypatch.setattr(click.Path, "convert", lambda self, value, param, ctx: value)
    monkeypatch.setattr(click.File, "convert", lambda self, value, param, ctx: value)
    monkeypatch.setattr(click.Option, "prompt_for_value", lambda self, ctx: "answer")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_command_path_and_link_is_real(document):
    assert problems(document.read_text(), document) == []


def test_the_diagnostic_codes_listed_are_the_harness_codes():
    section = (ROOT / "docs" / "using.md").read_text().split("## Diagnostics")[1]
    listed = {
        code
        for row in re.findall(r"^\| (`.+?) \|", section, re.MULTILINE)
        for code in re.findall(r"`([a-z-]+)`", row)
    }
    assert listed == set(CATALOGUE)


def test_the_modules_architecture_places_exist():
    """Each item of "Where each module is" links its folder; the files it names are there."""
    section = (ROOT / "docs" / "architecture.md").read_text().split("## Where each module is")[1]
    missing = [
        f"{folder}{name}"
        for folder, item in re.findall(
            r"^- \[([\w/]+/)\]\(\S+\)(.*?)(?=^- |^#)", section, re.MULTILINE | re.DOTALL
        )
        for name in re.findall(r"`(\w+\.py)`", item)
        if not (ROOT / folder / name).exists()
    ]
    assert missing == []


def test_every_module_of_the_packages_is_placed_in_architecture():
    """Each module of the packages "Where each module is" describes is named there (seven of
    the web's were not)."""
    section = (ROOT / "docs" / "architecture.md").read_text().split("## Where each module is")[1]
    unnamed = [
        str(path.relative_to(ROOT))
        for folder in (
            "server/web",
            "server/core",
            "worker/harness",
            "worker/grading",
            "worker/cli",
            "hpcgrade",
        )
        for path in sorted((ROOT / folder).glob("*.py"))
        if path.stem != "__init__" and not re.search(rf"`{path.stem}(\.py)?`", section)
    ]
    assert unnamed == []


@pytest.mark.parametrize(
    "text",
    [
        "```bash\nhpcgrade sumbit autograd-q work.py\n```",
        "```bash\n.venv/bin/hpcgrade grade autograd-q work.py --bogus\n```",
        "```bash\nhpcgrade grade autograd-q work.py --lang fr\n```",
        "```bash\nhpcgrade grade autograd-q\n```",
        "```bash\nhpcgrade exercise\n```",
        "```bash\nscripts/tset\n```",
        "```bash\nscripts/run --prot 8080\n```",
        "```bash\n.venv/bin/python bench/warm_vs_fresh.py --hot 40\n```",
        "```bash\n.venv/bin/python bench/no_such.py\n```",
        "```bash\n.venv/bin/gunicorn -w 2 'server.web.app:make_app()'\n```",
        '```bash\neval "$(scripts/servces)"\n```',
        "```bash\nrm -rf instance\n```",
        "```bash\nscripts/test tests/test_no_such.py\n```",
        "```python\n%hpcgrade sumbit autograd-q\n```",
        "```python\nfrom worker.harness.checks import Context, expect_gradient\n```",
        "```python\nfrom worker.harness.no_such import check\n```",
        "`hpcgrade pilot start --days 3`",
        "`worker/grading/no_such.py`",
        "[the design](DESIGN.md)",
        "[security](docs/security.md#no-such-heading)",
    ],
)
def test_a_wrong_command_path_or_link_is_found(text):
    assert len(problems(text, ROOT / "README.md")) == 1
