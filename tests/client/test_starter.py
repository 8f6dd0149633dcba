"""`hpcgrade starter EXERCISE`: the starter, visible checks and support code the exercise's page
offers, written for a student to start from in the terminal, named as the page names them, and
never over the student's own work."""

from click.testing import CliRunner
from helpers import SECOND_COURSE, second_edition
from test_client_output import portal  # noqa: F401 - a fixture

from hpcgrade.service import Service
from hpcgrade.terminal import GRADED, NOT_LOGGED_IN, REFUSED, starter
from server.core.catalogue import default_root


def test_the_starter_visible_checks_and_support_code_are_written(portal, tmp_path):  # noqa: F811
    folder = tmp_path / "work"
    result = CliRunner().invoke(starter, ["autograd-finetune", "--dir", str(folder)])
    assert result.exit_code == GRADED, result.output
    published = default_root() / "autograd-finetune"
    assert sorted(p.name for p in folder.iterdir()) == [
        "autograd_finetune.py",
        "exercise_support.py",
        "visible.py",
    ]
    assert (folder / "autograd_finetune.py").read_text() == (published / "starter.py").read_text()
    assert (folder / "exercise_support.py").read_text() == (published / "support.py").read_text()
    assert f"hpcgrade check autograd-finetune {folder / 'autograd_finetune.py'}" in result.output


def test_the_students_work_is_never_overwritten_without_force(portal, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(starter, ["autograd-q"]).exit_code == GRADED
    work = tmp_path / "autograd-q" / "autograd_q.py"
    work.write_text("# my answer\n")
    again = CliRunner().invoke(starter, ["autograd-q"])
    assert again.exit_code == NOT_LOGGED_IN and "already there" in again.stderr
    assert work.read_text() == "# my answer\n"
    forced = CliRunner().invoke(starter, ["autograd-q", "--force"])
    assert forced.exit_code == GRADED and work.read_text().startswith("import")


def test_an_unknown_exercise_or_one_in_two_courses_is_refused(portal, course, tmp_path):  # noqa: F811
    unknown = CliRunner().invoke(starter, ["no-such-exercise", "--dir", str(tmp_path / "a")])
    assert unknown.exit_code == REFUSED and not (tmp_path / "a").exists()
    second_edition(course, tmp_path / "exercises")
    both = CliRunner().invoke(starter, ["autograd-q", "--dir", str(tmp_path / "b")])
    assert both.exit_code == REFUSED and "name one" in both.stderr
    named = CliRunner().invoke(
        starter, [f"{SECOND_COURSE}/autograd-q", "--dir", str(tmp_path / "b")]
    )
    assert named.exit_code == GRADED, named.output
    assert f"hpcgrade check {SECOND_COURSE}/autograd-q" in named.output


def test_a_forged_name_or_a_folder_that_cannot_be_written_is_said_plainly(
    portal, tmp_path, monkeypatch
):  # noqa: F811
    real = Service.get

    def forged(self, path, **params):
        answer = real(self, path, **params)
        return dict(
            answer, names={"starter.py": "..", "support.py": "../../x.py", "visible.py": ""}
        )

    monkeypatch.setattr(Service, "get", forged)
    folder = tmp_path / "work"
    written = CliRunner().invoke(starter, ["autograd-q", "--dir", str(folder)])
    assert written.exit_code == GRADED, written.output
    assert sorted(p.name for p in folder.iterdir()) == ["starter.py", "visible.py"]
    (tmp_path / "afile").write_text("")
    refused = CliRunner().invoke(starter, ["autograd-q", "--dir", str(tmp_path / "afile" / "sub")])
    assert refused.exit_code == NOT_LOGGED_IN and "cannot write into" in refused.stderr
    assert "Traceback" not in refused.output
