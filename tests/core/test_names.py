"""Given and family names: the guess that splits a full name, the order every list of people
sorts in, migration 0018 that splits the names of the accounts there are, and a roster CSV read
as a university's or a spreadsheet's export writes it (Spanish headers and roles, semicolons)."""

from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from helpers import the_course

from server.core import migrate
from server.core.models import User
from server.core.names import by_family_name, name_parts, split_name
from server.core.roster import guess_columns, import_roster, read_roster, roster_header
from server.core.users import UserError, add_user


@pytest.mark.parametrize(
    "full, parts",
    [
        ("Ana", ("Ana", "")),
        ("Ana García", ("Ana", "García")),
        ("Ana García López", ("Ana", "García López")),
        ("Ana María García López", ("Ana María", "García López")),
        ("María José de la Fuente Ruiz", ("María José", "de la Fuente Ruiz")),
        ("Juan de la Cruz", ("Juan", "de la Cruz")),
        ("García López, Ana", ("Ana", "García López")),
        ("  Ana   García  ", ("Ana", "García")),
        ("", ("", "")),
    ],
)
def test_a_full_name_is_split_as_a_spanish_class_list_would(full, parts):
    assert split_name(full) == parts


def test_the_parts_given_are_kept_and_make_the_name():
    assert name_parts("", "Ana", "García López") == ("Ana García López", "Ana", "García López")
    assert name_parts("Ana G.", "Ana", "García") == ("Ana G.", "Ana", "García")
    # a directory entry with a cn and an sn but no givenName
    assert name_parts("Ana María Pérez", "", "Pérez") == ("Ana María Pérez", "Ana María", "Pérez")


def person(username: str, name: str) -> SimpleNamespace:
    given, family = split_name(name)
    return SimpleNamespace(username=username, name=name, given_name=given, family_name=family)


def test_lists_sort_by_family_name_then_given_name_accents_aside():
    people = [
        person("zoe", "Zoe Álvarez"),
        person("bea", "Bea Alvarez"),
        person("ana", "Ana Ñúñez Díaz"),  # Ñ as N: beside Núñez, not after Z
        person("carl", "Carl Nuñez"),
        person("dani", "Dani García"),
        person("eva", "Eva de la Fuente"),
        person("fede", "fede ALVAREZ"),
    ]
    order = [p.username for p in sorted(people, key=by_family_name)]
    # Álvarez beside Alvarez (by given name among them), "de la Fuente" under d, case aside
    assert order == ["bea", "fede", "zoe", "eva", "dani", "carl", "ana"]


def test_0018_splits_the_names_of_the_accounts_there_are(empty_database_url):
    from test_database import insert

    migrate.upgrade(empty_database_url, "0016")
    engine = sa.create_engine(empty_database_url)
    names = {
        "ana": "Ana García López",
        "mj": "María José de la Fuente Ruiz",
        "bea": "Bea",
        "carl": "Núñez, Carl",
    }
    with engine.begin() as connection:
        for username, name in names.items():
            insert(
                connection,
                "users",
                username=username,
                name=name,
                email=f"{username}@uni.es",
                password_hash="x",
                notices="{}",
            )
    migrate.upgrade(empty_database_url)
    with engine.connect() as connection:
        found = {
            row.username: (row.name, row.given_name, row.family_name)
            for row in connection.execute(
                sa.text("SELECT username, name, given_name, family_name FROM users")
            )
        }
    assert found == {
        "ana": ("Ana García López", "Ana", "García López"),
        "mj": ("María José de la Fuente Ruiz", "María José", "de la Fuente Ruiz"),
        "bea": ("Bea", "Bea", ""),
        "carl": ("Núñez, Carl", "Carl", "Núñez"),
    }
    migrate.downgrade(empty_database_url, "0016")
    columns = {column["name"] for column in sa.inspect(engine).get_columns("users")}
    assert "given_name" not in columns and "name" in columns
    engine.dispose()


# --- a roster as exports write it -----------------------------------------------------------------

SPANISH = (
    "Usuario;Nombre;Apellidos;Correo;Rol\r\n"
    "agarcia;Ana;García López;ana@uni.es;estudiante\r\n"
    "bmartin;Bea;Martín;bea@uni.es;Alumna\r\n"
    "cruiz;Carlos;Ruiz;carlos@uni.es;Profesor asistente\r\n"
    "dsanz;Dani;Sanz;dani@uni.es;ayudante\r\n"
)


@pytest.mark.parametrize(
    "header, columns",
    [
        (
            ["Usuario", "Nombre", "Apellidos", "Correo", "Rol"],
            {"username": 0, "given_name": 1, "family_name": 2, "email": 3, "role": 4},
        ),
        (  # "Nombre" alone is the whole name
            ["Usuario", "Nombre", "Correo", "Rol"],
            {"username": 0, "name": 1, "email": 2, "role": 3},
        ),
        (
            ["Login", "First name", "Last name", "E-mail"],
            {"username": 0, "given_name": 1, "family_name": 2, "email": 3},
        ),
        (
            ["username", "name", "email", "role"],
            {"username": 0, "name": 1, "email": 2, "role": 3},
        ),
        (
            ["Nombre de usuario", " Nombre y apellidos ", "Correo electrónico", "ROL"],
            {"username": 0, "name": 1, "email": 2, "role": 3},
        ),
        (["Dear students", ""], {}),
    ],
)
def test_columns_are_guessed_from_headers_in_english_and_spanish(header, columns):
    assert guess_columns(header) == columns


@pytest.mark.parametrize(
    "first_line, delimiter, header",
    [
        ("username,name,email,role", ",", ["username", "name", "email", "role"]),
        ("Usuario;Nombre;Correo;Rol", ";", ["Usuario", "Nombre", "Correo", "Rol"]),
        ("user\tname\temail", "\t", ["user", "name", "email"]),
        ('"Apellidos, Nombre";Usuario;Correo', ";", ["Apellidos, Nombre", "Usuario", "Correo"]),
        ("username", ",", ["username"]),
    ],
)
def test_the_delimiter_is_the_one_the_header_holds_most_of(first_line, delimiter, header):
    assert roster_header(first_line + "\r\nx\r\n") == (delimiter, header)


def test_a_spanish_export_is_read_with_its_roles(db_session):
    plan = read_roster(db_session, SPANISH, the_course(db_session))
    assert not plan.errors and not plan.warnings
    assert [(row.username, row.given_name, row.family_name, row.role) for row in plan.new] == [
        ("agarcia", "Ana", "García López", "student"),
        ("bmartin", "Bea", "Martín", "student"),
        ("cruiz", "Carlos", "Ruiz", "ta"),
        ("dsanz", "Dani", "Sanz", "ta"),
    ]
    assert plan.new[0].name == "Ana García López"
    created, _plan = import_roster(db_session, SPANISH, the_course(db_session))
    ana = next(user for user in created if user.username == "agarcia")
    assert (ana.name, ana.given_name, ana.family_name) == (
        "Ana García López",
        "Ana",
        "García López",
    )


def test_a_roster_without_roles_is_of_students_and_an_unknown_role_is_a_wrong_line(db_session):
    course = the_course(db_session)
    plan = read_roster(db_session, "Usuario;Nombre;Correo\nagarcia;Ana García;a@x.es\n", course)
    assert [(row.role, row.family_name) for row in plan.new] == [("student", "García")]
    plan = read_roster(db_session, "username,name,email,role\nx1,X,x@x.es,decano\n", course)
    assert "role must be student, ta, instructor or admin, not “decano”" in plan.errors[0][1]


def test_a_roster_that_names_no_usable_column_says_which_are_missing(db_session):
    with pytest.raises(UserError, match="no column of the roster holds the email, full name"):
        read_roster(db_session, "Usuario;Nota\nx;1\n", the_course(db_session))


def test_an_address_twice_or_another_accounts_is_a_warning_not_an_error(db_session):
    course = the_course(db_session)
    add_user(db_session, "olga", "Olga Ruiz", "Olga@uni.es", "student", None, course=course)
    text = (
        "username,name,email\n"
        "carl,Carl Ruiz,c@uni.es\n"
        "dani,Dani Sanz,C@uni.es\n"
        "eva,Eva Gil,olga@uni.es\n"
        "olga,Olga Ruiz,olga@uni.es\n"
    )
    plan = read_roster(db_session, text, course)
    assert not plan.errors and [row.username for row in plan.new] == ["carl", "dani", "eva"]
    assert plan.warnings == [
        (3, "C@uni.es is also the address of carl (line 2)"),
        (4, "olga@uni.es is already the address of the account olga"),
        (5, "olga@uni.es is also the address of eva (line 4)"),
    ]
    assert db_session.scalar(sa.select(User).where(User.username == "eva")) is None
