"""Settings (SPEC §3, §10): defaults, precedence CLI > env > file > defaults, errors naming field and source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attp_server.errors import AttpError, ConfigError
from attp_server.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stray ./attp.toml in the real working directory must not leak into these tests."""
    monkeypatch.chdir(tmp_path)


def write_config(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(**kwargs: Any) -> str:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as caught:
        load_settings(**kwargs)
    return str(caught.value)


# --- defaults ----------------------------------------------------------------------------------

SPEC_DEFAULTS = {
    "timeout_s": 10,
    "memory_mb": 256,
    "max_tool_calls": 200,
    "max_code_chars": 20_000,
    "max_output_bytes": 65_536,
    "max_result_bytes": 1_048_576,
    "transport": "stdio",
    "host": "127.0.0.1",
    "port": 8765,
    "engine": "python",
    "capture_print": True,
    "result_format": "json",  # issue 13: chosen by measurement (docs/programs.md "Result text"); SPEC §4 said toml
    "envelope_strict": False,
    "workspace": Path("workspace"),
    "auth_token": None,
    "allowed_hosts": [],
    "toolpack_options": {},
    "log_level": "INFO",
}


@pytest.mark.parametrize(("field", "value"), [pytest.param(k, v, id=k) for k, v in SPEC_DEFAULTS.items()])
def test_defaults_match_the_spec(field: str, value: Any) -> None:
    assert getattr(load_settings(environ={}), field) == value
    assert getattr(Settings(), field) == value


def test_every_spec_field_exists_and_is_documented() -> None:
    spec_fields = {
        "workspace", "toolpacks", "skills_dirs", "engine", "timeout_s", "memory_mb", "max_tool_calls",
        "max_code_chars", "max_output_bytes", "max_result_bytes", "capture_print", "result_format",
        "envelope_strict", "transport", "host", "port", "auth_token", "allowed_hosts", "db_path", "log_level",
    }  # fmt: skip
    assert spec_fields <= set(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        assert field.description, name


def test_settings_built_directly_ignore_the_environment() -> None:
    assert Settings(timeout_s=3).timeout_s == 3


# --- precedence ----------------------------------------------------------------------------------


def test_precedence_cli_over_env_over_file_over_defaults(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'timeout_s = 5\nmemory_mb = 128\nport = 1000\nhost = "0.0.0.0"\n')
    settings = load_settings(
        cli={"timeout_s": 9},
        config_file=path,
        environ={"ATTP_TIMEOUT_S": "7", "ATTP_MEMORY_MB": "512"},
    )
    assert settings.timeout_s == 9  # command line
    assert settings.memory_mb == 512  # environment
    assert (settings.port, settings.host) == (1000, "0.0.0.0")  # file
    assert settings.max_tool_calls == 200  # default


@pytest.mark.parametrize(
    ("cli", "environ", "file_text", "expected"),
    [
        pytest.param({}, {}, "", 10.0, id="default"),
        pytest.param({}, {}, "timeout_s = 5\n", 5.0, id="file"),
        pytest.param({}, {"ATTP_TIMEOUT_S": "7"}, "timeout_s = 5\n", 7.0, id="env-over-file"),
        pytest.param({"timeout_s": 9}, {"ATTP_TIMEOUT_S": "7"}, "timeout_s = 5\n", 9.0, id="cli-over-env"),
        pytest.param({"timeout_s": 9}, {}, "timeout_s = 5\n", 9.0, id="cli-over-file"),
        pytest.param({"timeout_s": None}, {"ATTP_TIMEOUT_S": "7"}, "", 7.0, id="cli-none-is-unset"),
        pytest.param({}, {"attp_timeout_s": "6"}, "", 6.0, id="env-case-insensitive"),
    ],
)
def test_precedence_table(
    tmp_path: Path, cli: dict[str, Any], environ: dict[str, str], file_text: str, expected: float
) -> None:
    path = write_config(tmp_path, file_text)
    assert load_settings(cli=cli, config_file=path, environ=environ).timeout_s == expected


def test_unrelated_environment_variables_are_ignored() -> None:
    settings = load_settings(environ={"PATH": "/bin", "HOME": "/root", "TIMEOUT_S": "1", "MEMORY_MB": "1"})
    assert (settings.timeout_s, settings.memory_mb) == (10, 256)


@pytest.mark.parametrize(
    ("environ", "field", "value"),
    [
        pytest.param({"ATTP_CAPTURE_PRINT": "false"}, "capture_print", False, id="bool"),
        pytest.param({"ATTP_TOOLPACKS": '["files", "shell"]'}, "toolpacks", ["files", "shell"], id="json-list"),
        pytest.param(
            {"ATTP_ALLOWED_HOSTS": '["host.docker.internal"]'},
            "allowed_hosts",
            ["host.docker.internal"],
            id="json-list-hosts",
        ),
        pytest.param({"ATTP_RESULT_FORMAT": "json"}, "result_format", "json", id="literal"),
        pytest.param({"ATTP_WORKSPACE": "/srv/ws"}, "workspace", Path("/srv/ws"), id="path"),
        pytest.param({"ATTP_ENVELOPE_STRICT": "1"}, "envelope_strict", True, id="bool-digit"),
    ],
)
def test_environment_values_are_parsed(environ: dict[str, str], field: str, value: Any) -> None:
    assert getattr(load_settings(environ=environ), field) == value


def test_auth_token_from_environment_is_secret() -> None:
    settings = load_settings(environ={"ATTP_AUTH_TOKEN": "s3cret-token"})
    assert settings.auth_token is not None
    assert settings.auth_token.get_secret_value() == "s3cret-token"
    assert "s3cret-token" not in repr(settings)


def test_default_config_file_in_working_directory(tmp_path: Path) -> None:
    write_config(tmp_path, "max_tool_calls = 7\n", name="attp.toml")
    assert load_settings(environ={}).max_tool_calls == 7


def test_explicit_config_file_replaces_the_default_one(tmp_path: Path) -> None:
    write_config(tmp_path, "max_tool_calls = 7\nmemory_mb = 100\n", name="attp.toml")
    path = write_config(tmp_path, "max_tool_calls = 8\n", name="other.toml")
    settings = load_settings(config_file=path, environ={})
    assert (settings.max_tool_calls, settings.memory_mb) == (8, 256)


def test_bad_value_in_default_config_file_names_it(tmp_path: Path) -> None:
    write_config(tmp_path, "memory_mb = 1\n", name="attp.toml")
    message = config_error()
    assert "memory_mb" in message
    assert "config file attp.toml" in message


# --- toolpack tables -----------------------------------------------------------------------------


def test_toolpack_tables_land_in_toolpack_options(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[toolpacks.files]\nmax_lines = 10\n\n[toolpacks.shell]\ndeny_patterns = ['rm']\n")
    settings = load_settings(config_file=path, environ={})
    assert settings.toolpack_options == {"files": {"max_lines": 10}, "shell": {"deny_patterns": ["rm"]}}
    assert settings.toolpacks == ["files", "skills", "memory"]


def test_toolpacks_enabled_beside_pack_tables(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[toolpacks]\nenabled = ["files", "shell"]\n\n[toolpacks.files]\nmax_lines = 10\n')
    settings = load_settings(config_file=path, environ={})
    assert settings.toolpacks == ["files", "shell"]
    assert settings.toolpack_options == {"files": {"max_lines": 10}}


def test_toolpacks_as_a_plain_list(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'toolpacks = ["files", "mypkg.tools:pack"]\n')
    assert load_settings(config_file=path, environ={}).toolpacks == ["files", "mypkg.tools:pack"]


def test_nested_toolpack_option_from_environment() -> None:
    settings = load_settings(environ={"ATTP_TOOLPACK_OPTIONS__FILES__MAX_LINES": "5"})
    assert settings.toolpack_options.keys() == {"files"}
    assert int(settings.toolpack_options["files"]["max_lines"]) == 5


def test_toolpack_options_of_other_packs_survive_a_nested_override(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[toolpacks.files]\nmax_lines = 10\n\n[toolpacks.shell]\ntimeout = 3\n")
    settings = load_settings(config_file=path, environ={"ATTP_TOOLPACK_OPTIONS__SHELL__TIMEOUT": "4"})
    assert settings.toolpack_options["files"] == {"max_lines": 10}
    assert int(settings.toolpack_options["shell"]["timeout"]) == 4


@pytest.mark.parametrize(
    ("cli", "environ"),
    [
        pytest.param({}, {"ATTP_TOOLPACK_OPTIONS__FILES__MAX_BYTES": "5"}, id="environment"),
        pytest.param({"toolpack_options": {"files": {"max_bytes": 5}}}, {}, id="command-line"),
    ],
)
def test_nested_override_keeps_sibling_options_from_the_file(
    tmp_path: Path, cli: dict[str, Any], environ: dict[str, str]
) -> None:
    path = write_config(tmp_path, "[toolpacks.files]\nmax_lines = 10\n")
    options = load_settings(cli=cli, config_file=path, environ=environ).toolpack_options["files"]
    assert options.get("max_lines") == 10
    assert int(options["max_bytes"]) == 5


# --- bad values name the field and the source ----------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "field", "source"),
    [
        pytest.param({"ATTP_TIMEOUT_S": "abc"}, "timeout_s", "ATTP_TIMEOUT_S", id="not-a-number"),
        pytest.param({"ATTP_TIMEOUT_S": "0"}, "timeout_s", "ATTP_TIMEOUT_S", id="zero-timeout"),
        pytest.param({"ATTP_MEMORY_MB": "1"}, "memory_mb", "ATTP_MEMORY_MB", id="too-little-memory"),
        pytest.param({"ATTP_TRANSPORT": "tcp"}, "transport", "ATTP_TRANSPORT", id="unknown-transport"),
        pytest.param({"ATTP_PORT": "70000"}, "port", "ATTP_PORT", id="port-too-high"),
        pytest.param({"ATTP_CAPTURE_PRINT": "maybe"}, "capture_print", "ATTP_CAPTURE_PRINT", id="not-a-bool"),
    ],
)
def test_bad_environment_value_names_field_and_variable(environ: dict[str, str], field: str, source: str) -> None:
    message = config_error(environ=environ)
    assert field in message
    assert f"environment variable {source}" in message
    assert repr(environ[source]) in message


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        pytest.param("ATTP_TOOLPACKS", "files,shell", "toolpacks", ["files", "shell"], id="toolpacks-commas"),
        pytest.param("ATTP_TOOLPACKS", '["files"]', "toolpacks", ["files"], id="toolpacks-json"),
        pytest.param("ATTP_ALLOWED_HOSTS", "a.example:*, b:*", "allowed_hosts", ["a.example:*", "b:*"], id="hosts"),
    ],
)
def test_environment_lists_take_json_or_commas(variable: str, value: str, field: str, expected: list[str]) -> None:
    assert getattr(load_settings(environ={variable: value}), field) == expected


@pytest.mark.parametrize("variable", ["ATTP_TOOLPACKS", "ATTP_ALLOWED_HOSTS"])
def test_undecodable_environment_list_names_the_variable(variable: str) -> None:
    assert variable in config_error(environ={variable: '["files"'})


def test_misspelt_environment_variable_is_an_error_with_a_suggestion() -> None:
    message = config_error(environ={"ATTP_TIMOUT_S": "3"})
    assert "ATTP_TIMOUT_S" in message and "ATTP_TIMEOUT_S" in message


def test_pack_options_from_environment() -> None:
    settings = load_settings(environ={"ATTP_FILES__MAX_LINES": "7"})
    assert settings.toolpack_options == {"files": {"max_lines": "7"}}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param('port = "x"\n', "port", id="port-string"),
        pytest.param("timeout_s = -1\n", "timeout_s", id="negative-timeout"),
        pytest.param('toolpacks = "files"\n', "toolpacks", id="toolpacks-not-list"),
        pytest.param('engine = "lua"\n', "engine", id="unknown-engine"),
        pytest.param('log_level = "LOUD"\n', "log_level", id="unknown-log-level"),
    ],
)
def test_bad_file_value_names_field_and_file(tmp_path: Path, text: str, field: str) -> None:
    path = write_config(tmp_path, text)
    message = config_error(config_file=path)
    assert field in message
    assert f"config file {path}" in message


@pytest.mark.parametrize(
    ("cli", "field"),
    [
        pytest.param({"port": 99999}, "port", id="port"),
        pytest.param({"result_format": "yaml"}, "result_format", id="result-format"),
        pytest.param({"max_code_chars": 0}, "max_code_chars", id="max-code-chars"),
    ],
)
def test_bad_cli_value_names_field_and_command_line(cli: dict[str, Any], field: str) -> None:
    message = config_error(cli=cli)
    assert field in message
    assert "command line" in message


def test_a_bad_item_of_a_list_is_named_by_its_place_in_plain_words(tmp_path: Path) -> None:
    """Issue 34: ``skills_dirs = ["/x", 3]`` said "Input is not a valid path for <class 'pathlib.Path'>"."""
    path = write_config(tmp_path, 'skills_dirs = ["/x", 3]\n')
    message = config_error(config_file=path)
    assert "skills_dirs: item 2: expected a path, as text (got ['/x', 3] from config file" in message
    assert "<class" not in message


def test_bad_value_names_the_source_that_won(tmp_path: Path) -> None:
    path = write_config(tmp_path, "memory_mb = 512\n")
    message = config_error(config_file=path, environ={"ATTP_MEMORY_MB": "2"})
    assert "environment variable ATTP_MEMORY_MB" in message
    assert "config file" not in message


def test_every_bad_value_is_reported(tmp_path: Path) -> None:
    message = config_error(environ={"ATTP_PORT": "-1", "ATTP_MEMORY_MB": "1"})
    assert "port" in message
    assert "memory_mb" in message


# --- unknown keys and unusable files -------------------------------------------------------------


def test_unknown_key_in_file_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    path = write_config(tmp_path, "timout_s = 3\n")
    message = config_error(config_file=path)
    assert "timout_s" in message
    assert "'timeout_s'" in message
    assert f"config file {path}" in message


def test_unknown_nested_key_names_its_whole_path_and_the_right_one(tmp_path: Path) -> None:
    """A misspelt key of an ``[mcp_servers.NAME]`` table is named with its path, and the key meant is that table's."""
    path = write_config(tmp_path, '[mcp_servers.github]\ncommand = "npx"\nexclude_tool = ["create_*"]\n')
    message = config_error(config_file=path)
    assert (
        f"unknown setting 'mcp_servers.github.exclude_tool' in config file {path}; "
        "did you mean 'mcp_servers.github.exclude_tools'?"
    ) in message
    message = config_error(environ={"ATTP_MCP_SERVERS": '{"t": {"url": "https://x.example/mcp", "readonly": true}}'})
    assert (
        "'mcp_servers.t.readonly' in environment variable ATTP_MCP_SERVERS; did you mean 'mcp_servers.t.read_only'?"
        in message
    )
    assert "did you mean 'mcp_servers'" not in config_error(
        config_file=write_config(tmp_path, "[mcp_servers.x]\nzzz = 1\n")
    )


def test_unknown_cli_key_is_an_error_with_a_suggestion() -> None:
    message = config_error(cli={"memory_md": 300})
    assert "memory_md" in message
    assert "'memory_mb'" in message
    assert "command line" in message


def test_unknown_key_in_toolpacks_table_is_an_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[toolpacks]\nenabeld = ["files", "shell"]\n')
    message = config_error(config_file=path)
    assert "enabeld" in message
    assert "enabled" in message


def test_missing_config_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    message = config_error(config_file=path)
    assert str(path) in message
    assert "does not exist" in message


def test_config_file_that_is_not_toml_names_it(tmp_path: Path) -> None:
    path = write_config(tmp_path, "this is = = not toml\n")
    message = config_error(config_file=path)
    assert str(path) in message
    assert "TOML" in message
    assert "line 1" in message


def test_config_file_that_is_a_directory_names_it(tmp_path: Path) -> None:
    message = config_error(config_file=tmp_path)
    assert str(tmp_path) in message


def test_config_error_is_a_server_error() -> None:
    assert issubclass(ConfigError, AttpError)


def test_profiles_choose_toolpacks_and_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "attp.toml"
    config.write_text(
        'timeout_s = 5\n\n[profiles.init]\ntoolpacks = ["files", "skills"]\nworkspace = "scenarios/demo"\n\n'
        '[profiles.execute]\ntoolpacks = ["files", "skills", "shell"]\ntimeout_s = 30\n'
    )
    init = load_settings(config_file=config, environ={}, profile="init")
    assert (init.toolpacks, str(init.workspace), init.timeout_s) == (["files", "skills"], "scenarios/demo", 5)
    execute = load_settings(config_file=config, environ={"ATTP_TIMEOUT_S": "7"}, profile="execute")
    assert (execute.toolpacks, execute.timeout_s) == (["files", "skills", "shell"], 7)
    assert load_settings(config_file=config, environ={}).toolpacks == Settings().toolpacks
    with pytest.raises(ConfigError, match="did you mean 'init'"):
        load_settings(config_file=config, environ={}, profile="inti")


def test_config_file_nested_too_deeply_is_a_config_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    message = config_error(config_file=path)
    assert str(path) in message and "too deeply" in message


def test_named_token_values_are_never_repeated_in_errors(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'auth_token = "abc"\n[auth_tokens]\ndefault = "zz-secret-zz"\n')
    message = config_error(config_file=path)
    assert "auth_tokens" in message and f"config file {path}" in message
    assert "zz-secret-zz" not in message


def test_nested_environment_variables_reach_dict_settings() -> None:
    settings = load_settings(environ={"ATTP_MCP_SERVERS__TIME__COMMAND": "mcp-server-time"})
    assert settings.upstream_servers["time"].command == "mcp-server-time"
