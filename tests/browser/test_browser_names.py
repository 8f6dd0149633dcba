"""A class's worth of students in a real browser (Debian's Chromium), through nginx, on the whole
service, at both widths and in both languages: the gradebook of a course with sixteen exercises
shows fifteen students and more on a 1366×800 screen, its Total in sight and each exercise's
full title on its numbered column; a Spanish class list is imported on the roster page with its
columns confirmed and one chosen by hand, its skipped lines still listed after the import; the
students sort by family name."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in
from stack import COURSES

pytestmark = [pytest.mark.browser, pytest.mark.services]

COURSE = COURSES[1]  # the lab: the site's students, and this module's own
LEAD, LEAD_PASSWORD = "lola", "lola-long-password"
GRADES = f"/courses/{COURSE}/staff/grades"
ROSTER = f"/courses/{COURSE}/staff/roster/"
CLASS_LIST = [
    ("Lucía", "Álvarez Gil"),
    ("Mateo", "Alonso"),
    ("Sara", "Blanco Ruiz"),
    ("Hugo", "Castro"),
    ("Julia", "de la Fuente"),
    ("Leo", "Delgado Sanz"),
    ("Paula", "Domínguez"),
    ("Álex", "Fernández"),
    ("Marta", "Gómez Peña"),
    ("Iker", "Herrero"),
    ("Nora", "Iglesias"),
    ("Pablo", "Jiménez"),
    ("Irene", "León"),
    ("Bruno", "Muñoz"),
    ("Elena", "Navarro"),
    ("Dario", "Ortega Vidal"),
]


@pytest.fixture(scope="module")
def lab(site):
    """The lab with an instructor of its own, lola, and sixteen more students, imported as a
    Spanish export writes them (the command reads it as the roster page does)."""
    site.stack.hpcgrade(
        "users",
        "add",
        LEAD,
        "--given-name",
        "Lola",
        "--family-name",
        "Labrador",
        "--email",
        "lola@uni.example",
        "--role",
        "instructor",
        "--course",
        COURSE,
        "--password",
        LEAD_PASSWORD,
    )
    rows = "".join(
        f"c{n:02d};{given};{family};c{n:02d}@uni.example;estudiante\n"
        for n, (given, family) in enumerate(CLASS_LIST)
    )
    site.stack.hpcgrade(
        "users",
        "import",
        "--course",
        COURSE,
        "-",
        stdin="Usuario;Nombre;Apellidos;Correo;Rol\n" + rows,
    )
    return site


def in_sight(page, selector: str) -> list[bool]:
    """Whether each element matched lies wholly inside the window and inside the gradebook's
    scrolling box (neither scrolled away in it nor below the fold)."""
    return page.evaluate(
        """selector => {
        const box = document.querySelector(".table-wrap.gradebook").getBoundingClientRect();
        const root = document.documentElement;
        return [...document.querySelectorAll(selector)].map(el => {
            const r = el.getBoundingClientRect();
            return r.top >= Math.max(0, box.top) - 0.5 && r.left >= Math.max(0, box.left) - 0.5
                && r.bottom <= Math.min(root.clientHeight, box.bottom) + 0.5
                && r.right <= Math.min(root.clientWidth, box.right) + 0.5; });
    }""",
        selector,
    )


@ON_A_DESKTOP_AND_A_PHONE
def test_the_gradebook_shows_fifteen_students_their_total_and_each_title(
    lab, open_page, kind, lang
):
    page = open_page(kind)
    if kind == "desktop":
        page.set_viewport_size({"width": 1366, "height": 800})
    log_in(page, lab, LEAD, LEAD_PASSWORD)
    page.goto(lab.url(GRADES))
    assert page.locator("html").get_attribute("lang") == lang
    assert layout_problems(page) == {}
    rows = in_sight(page, "table.grid tbody tr")
    if kind == "desktop":  # without scrolling the page, nor the gradebook's box
        assert page.evaluate("() => window.scrollY") == 0
        assert sum(rows[:20]) >= 15, rows
    # the total and the percentage, however many exercises there are to scroll past
    assert all(
        in_sight(page, "table.grid thead .col-total, table.grid tbody tr:first-child .col-total")
    )
    assert all(in_sight(page, "table.grid tbody tr:first-child .col-percent"))
    page.evaluate(
        """() => { const box = document.querySelector(".table-wrap.gradebook");
        box.scrollTo(box.scrollWidth / 2, 0); }"""
    )
    assert all(in_sight(page, "table.grid tbody tr:first-child .col-total"))
    # each exercise's column: a number, its full title on hover and for screen readers
    first = page.locator("table.grid thead th.col-exercise a").first
    title = first.get_attribute("title")
    assert first.locator("[aria-hidden=true]").text_content() == "1" and len(title) > 3
    assert page.get_by_role("link", name=title, exact=True).first.is_visible()
    assert first.bounding_box()["width"] < 60  # a number, not a title wrapping on lines
    legend = page.locator("details.gradebook-legend")
    legend.locator("summary").click()
    assert legend.get_by_role("link", name=title, exact=True).is_visible()
    # by family name: Álvarez Gil beside Alonso, before Blanco, whatever the username
    names = page.locator("table.grid tbody th a").all_text_contents()
    ours = [name for name in names if not name.startswith("Student ")]
    assert ours[:3] == ["Mateo Alonso", "Lucía Álvarez Gil", "Sara Blanco Ruiz"]


@ON_A_DESKTOP_AND_A_PHONE
def test_a_spanish_class_list_is_imported_with_its_columns_confirmed(lab, open_page, kind, lang):
    prefix = f"{kind[0]}{lang}"
    roster = (
        "ID;Nombre;Apellidos;Correo electrónico;Rol\n"
        f"{prefix}1;Ana;García López;{prefix}1@uni.example;estudiante\n"
        f"{prefix}2;Iván;de la Torre;{prefix}2@uni.example;Ayudante\n"
        f"{prefix}3;Eva;Sanz;no-es-correo;alumna\n"
    )
    page = open_page(kind)
    log_in(page, lab, LEAD, LEAD_PASSWORD)
    page.goto(lab.url(ROSTER))
    template = page.locator(f"a[href='{ROSTER}template.csv']")
    assert template.is_visible()
    page.locator("input[type=file][name=roster]").set_input_files(
        {"name": "lista.csv", "mimeType": "text/csv", "buffer": roster.encode()}
    )
    with page.expect_navigation():
        page.locator("form:has(input[name=roster]) [type=submit]").click()
    # "ID" is no header it knows: the username's column is asked for, nothing to import yet
    assert page.locator("[role=alert]").count() == 1
    assert page.locator("form.roster-confirm").count() == 0
    assert layout_problems(page) == {}
    columns = page.locator("form.roster-columns")
    assert columns.locator("select[name=given_name]").input_value() == "1"  # Nombre
    assert columns.locator("select[name=family_name]").input_value() == "2"  # Apellidos
    assert columns.locator("select[name=email]").input_value() == "3"
    assert columns.locator("select[name=role]").input_value() == "4"
    columns.locator("select[name=username]").select_option(label="ID")
    with page.expect_navigation():
        columns.locator("button[type=submit]").click()
    assert layout_problems(page) == {}
    new = page.locator("section.roster-part", has=page.locator("td", has_text=f"{prefix}1"))
    assert "García López" in new.text_content() and "de la Torre" in new.text_content()
    with page.expect_navigation():
        page.locator("form.roster-confirm button[type=submit]").click()
    assert layout_problems(page) == {}
    # the page that reports the import: the new accounts' links, and the line left out
    assert page.locator("code.link").count() == 2
    left_out = page.locator("section.roster-part tbody tr")
    assert left_out.count() == 1 and left_out.locator("td").first.text_content() == "4"
    assert "no-es-correo" in left_out.text_content()
    page.goto(lab.url(f"{ROSTER}?q={prefix}&filter=ta"))
    assert page.locator("table.roster tbody th").all_text_contents()[0].startswith(f"{prefix}2")
