"""The registry: ids, registration, lazy entry points, `make`, `make_vec`, import cost."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import textwrap

import pytest
from toy_envs import ToyEnv

import xpgym
from xpgym.core import registry as reg
from xpgym.core.registry import (
    EnvSpec,
    UnknownEnvError,
    list_envs,
    load_entry_point,
    make,
    make_from_spec,
    make_vec,
    register,
    register_family,
    register_scheme,
    spec,
)

TOY = "toy_envs:ToyEnv"


@pytest.fixture(autouse=True)
def clean_registry():
    """Restore the registry after each test."""
    saved = dict(reg.registry)
    yield
    reg.registry.clear()
    reg.registry.update(saved)


# ------------------------------------------------------------------------------ ids


@pytest.mark.parametrize(
    "env_id",
    [
        "game:Toy-v0",
        "game:Toy-v12",
        "game:Toy-v0-easy",
        "game:Toy-v0-extreme-hard",
        "rg:arc_1d-v0",
        "math:GSM8K.test-v1",
        "my_family2:Toy_2-v3-v2_variant",
    ],
)
def test_well_formed_ids_register(env_id):
    assert register(env_id, TOY).id == env_id


@pytest.mark.parametrize(
    "env_id",
    [
        "Toy-v0",  # no category
        "game:Toy",  # no version
        "game:Toy-v",
        "game:Toy-vX",
        "Game:Toy-v0",  # category must be lowercase
        "1game:Toy-v0",
        "game:1Toy-v0",  # name starts with a letter
        "game:Toy-v0-",  # empty variant
        "game:To y-v0",
        "game::Toy-v0",
        "",
    ],
)
def test_malformed_ids_are_rejected(env_id):
    with pytest.raises(ValueError, match="does not match 'category:Name-vN\\[-variant\\]'"):
        register(env_id, TOY)


def test_spec_exposes_the_id_parts():
    env_spec = register("game:Toy-v3-extreme-hard", TOY)
    assert (env_spec.category, env_spec.name, env_spec.version, env_spec.variant) == (
        "game",
        "Toy",
        3,
        "extreme-hard",
    )


def test_variant_is_none_without_one():
    assert register("game:Toy-v0", TOY).variant is None


# ------------------------------------------------------------------- registration


@pytest.mark.parametrize("entry_point", ["toy_envs.ToyEnv", "toy_envs:", ":ToyEnv", "a b:C"])
def test_malformed_entry_point_strings_are_rejected(entry_point):
    with pytest.raises(ValueError, match=re.escape("must look like 'package.module:Attr'")):
        register("game:Toy-v0", entry_point)


def test_non_callable_entry_point_is_rejected():
    with pytest.raises(TypeError, match="must be a 'module:Attr' string or a callable"):
        register("game:Toy-v0", 42)  # type: ignore[arg-type]


def test_duplicate_registration_raises():
    register("game:Toy-v0", TOY)
    with pytest.raises(ValueError, match="already registered; pass override=True"):
        register("game:Toy-v0", TOY)


def test_override_replaces_the_registration():
    register("game:Toy-v0", TOY, episode_length=3)
    register("game:Toy-v0", TOY, override=True, episode_length=5)
    assert make("game:Toy-v0").episode_length == 5


def test_spec_kwargs_are_read_only():
    env_spec = register("game:Toy-v0", TOY, episode_length=3)
    with pytest.raises(TypeError):
        env_spec.kwargs["episode_length"] = 4  # type: ignore[index]


def test_spec_kwargs_do_not_alias_the_callers_dict():
    kwargs = {"episode_length": 3}
    env_spec = EnvSpec("game:Toy-v0", TOY, kwargs)
    kwargs["episode_length"] = 4
    assert env_spec.kwargs["episode_length"] == 3


def test_spec_pickles():
    env_spec = register("game:Toy-v0", TOY, episode_length=3, description="toy")
    assert pickle.loads(pickle.dumps(env_spec)) == env_spec


def test_requires_download_is_metadata_not_an_env_kwarg():
    env_spec = register("game:Toy-v0", TOY, requires_download=True, episode_length=3)
    assert env_spec.requires_download
    assert dict(env_spec.kwargs) == {"episode_length": 3}
    assert pickle.loads(pickle.dumps(env_spec)).requires_download
    assert not register("game:Toy-v1", TOY).requires_download


def test_entry_point_name_of_a_callable_is_module_and_qualname():
    assert register("game:Toy-v0", ToyEnv).entry_point_name() == "toy_envs:ToyEnv"


# ---------------------------------------------------------------- unknown ids


def test_unknown_id_error_lists_the_closest_ids():
    with pytest.raises(UnknownEnvError, match="did you mean 'game:GuessTheNumber-v0'"):
        spec("game:GuessTheNumbr-v0")


def test_unknown_id_without_version_suggests_ids_with_that_prefix():
    with pytest.raises(UnknownEnvError) as excinfo:
        make("game:GuessTheNumber")
    assert "'game:GuessTheNumber-v0'" in str(excinfo.value)
    assert "python -m xpgym list" in str(excinfo.value)


def test_unknown_id_error_is_a_key_error_with_a_readable_message():
    with pytest.raises(KeyError) as excinfo:
        make("nothing:Like-v0-this")
    assert (
        str(excinfo.value) == "unknown env id 'nothing:Like-v0-this' (see `python -m xpgym list`)"
    )


def test_non_str_id_raises_type_error():
    with pytest.raises(TypeError, match="env id must be a str"):
        spec(None)  # type: ignore[arg-type]


# ------------------------------------------------------------------- id schemes


def toy_scheme_spec(env_id: str) -> EnvSpec:
    """Resolver of the test scheme ``toys:<n>``: a `ToyEnv` of episode length ``n``."""
    return EnvSpec(env_id, TOY, {"episode_length": int(env_id.partition(":")[2])})


@pytest.fixture
def schemes(monkeypatch):
    """Registered schemes and families restored after the test."""
    monkeypatch.setattr(reg, "_schemes", dict(reg._schemes))
    monkeypatch.setattr(reg, "_families", dict(reg._families))


def test_scheme_ids_are_resolved_by_the_schemes_resolver(schemes):
    register_scheme("toys", toy_scheme_spec)
    env = make("toys:3")
    assert (env.episode_length, env.spec.id) == (3, "toys:3")
    assert spec("toys:5").kwargs == {"episode_length": 5}


def test_scheme_resolver_string_is_imported_on_first_lookup(schemes, lazy_module):
    register_scheme("lazy", f"{lazy_module}:lazy_spec")
    assert lazy_module not in sys.modules
    assert spec("lazy:anything/at:all").id == "lazy:anything/at:all"
    assert lazy_module in sys.modules


def test_make_vec_accepts_scheme_ids(schemes):
    register_scheme("toys", toy_scheme_spec)
    with make_vec("toys:4", 2) as vec:
        assert vec.num_envs == 2


def test_unknown_scheme_error_names_the_registered_schemes(schemes):
    register_scheme("toys", toy_scheme_spec)
    with pytest.raises(UnknownEnvError, match=r"'nope' is neither an env category nor an id "):
        make("nope:http://host/game:Toy-v0")
    with pytest.raises(UnknownEnvError, match=r"schemes: 'openenv:', 'ors:', 'remote:', 'toys:'"):
        make("nope:http://host/game:Toy-v0")


def test_duplicate_scheme_registration_raises(schemes):
    register_scheme("toys", toy_scheme_spec)
    with pytest.raises(ValueError, match="'toys' is registered; pass override=True"):
        register_scheme("toys", "elsewhere:resolver")


def test_scheme_override_replaces_the_resolver(schemes):
    register_scheme("toys", "elsewhere:resolver")
    register_scheme("toys", toy_scheme_spec, override=True)
    assert spec("toys:2").kwargs == {"episode_length": 2}


@pytest.mark.parametrize("scheme", ["Remote", "re-mote", "", "1x"])
def test_malformed_scheme_names_are_rejected(schemes, scheme):
    with pytest.raises(ValueError, match="must match"):
        register_scheme(scheme, toy_scheme_spec)


def test_malformed_scheme_resolver_strings_are_rejected(schemes):
    with pytest.raises(ValueError, match=re.escape("must look like 'package.module:function'")):
        register_scheme("toys", "no_colon")


def test_scheme_cannot_take_the_category_of_registered_ids_or_a_family(schemes):
    with pytest.raises(ValueError, match="category of registered ids"):
        register_scheme("game", toy_scheme_spec)
    register_family("fam", list)
    with pytest.raises(ValueError, match="category of a family"):
        register_scheme("fam", toy_scheme_spec)


def test_ids_and_families_cannot_use_a_scheme_as_category(schemes):
    register_scheme("toys", toy_scheme_spec)
    with pytest.raises(ValueError, match="'toys' is an id scheme"):
        register("toys:Toy-v0", TOY)
    with pytest.raises(ValueError, match="'toys' is an id scheme"):
        register_family("toys", list)


def test_remote_scheme_is_registered_by_import_xpgym():
    remote = spec("remote:http://127.0.0.1:1/game:GuessTheNumber-v0")
    assert remote.entry_point == "xpgym.remote.client:RemoteEnv"
    assert dict(remote.kwargs) == {"url": "http://127.0.0.1:1", "env_id": "game:GuessTheNumber-v0"}


# ------------------------------------------------------------------ lazy imports


@pytest.fixture
def lazy_module(tmp_path, monkeypatch):
    """A module on sys.path that records when it is imported."""
    name = "xpgym_test_lazy_env_module"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from toy_envs import ToyEnv

            from xpgym.core.registry import EnvSpec

            class LazyEnv(ToyEnv):
                '''A lazily imported env.'''

            def lazy_spec(env_id):
                return EnvSpec(env_id, "toy_envs:ToyEnv")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_register_does_not_import_the_entry_point(lazy_module):
    register("game:Lazy-v0", f"{lazy_module}:LazyEnv")
    assert lazy_module not in sys.modules


def test_make_imports_the_entry_point(lazy_module):
    register("game:Lazy-v0", f"{lazy_module}:LazyEnv")
    env = make("game:Lazy-v0")
    assert lazy_module in sys.modules
    assert type(env).__name__ == "LazyEnv"


def test_entry_point_with_a_missing_attribute_raises_import_error():
    with pytest.raises(ImportError, match=re.escape("xpgym.core.env has no Nope")):
        load_entry_point("xpgym.core.env:Nope")


def test_entry_point_resolves_dotted_attributes():
    assert load_entry_point("xpgym.core.registry:EnvSpec.entry_point_name") is (
        EnvSpec.entry_point_name
    )


# -------------------------------------------------------------------------- make


def test_make_sets_the_spec():
    env = make("game:GuessTheNumber-v0-easy")
    assert env.spec is spec("game:GuessTheNumber-v0-easy")


def test_make_records_caller_kwargs_in_the_spec():
    env = make("game:GuessTheNumber-v0-easy", max_turns=9)
    assert dict(env.spec.kwargs) == {"difficulty": "easy", "max_turns": 9}
    assert spec("game:GuessTheNumber-v0-easy").kwargs == {"difficulty": "easy"}


def test_caller_kwargs_keep_the_specs_metadata():
    register("game:Toy-v0", TOY, description="toy", requires_download=True, episode_length=3)
    env = make("game:Toy-v0", episode_length=5)
    assert env.spec.kwargs["episode_length"] == 5
    assert (env.spec.description, env.spec.requires_download) == ("toy", True)


def test_caller_kwargs_override_the_spec_kwargs():
    register("game:Toy-v0", TOY, episode_length=3)
    assert make("game:Toy-v0", episode_length=8).episode_length == 8


def test_callable_entry_point_is_called_with_the_kwargs():
    register("game:Toy-v0", ToyEnv, episode_length=4)
    assert make("game:Toy-v0").episode_length == 4


def test_unknown_kwargs_raise_type_error_listing_accepted_names():
    with pytest.raises(TypeError) as excinfo:
        make("game:GuessTheNumber-v0", max_turn=3)
    message = str(excinfo.value)
    assert "unexpected keyword argument(s) 'max_turn'" in message
    assert "it accepts: difficulty, max_number, max_turns, min_number" in message


def test_entry_point_taking_var_kwargs_accepts_any_kwargs():
    def factory(**kwargs):
        return ToyEnv(episode_length=kwargs.get("length", 3))

    register("game:Toy-v0", factory)
    assert make("game:Toy-v0", length=6).episode_length == 6


def test_entry_point_returning_a_non_env_raises_type_error():
    register("game:NotAnEnv-v0", lambda: "text")
    with pytest.raises(TypeError, match="returned str, not an xpgym Env"):
        make("game:NotAnEnv-v0")


def test_make_from_spec_builds_an_unregistered_spec():
    env = make_from_spec(EnvSpec("game:Unregistered-v0", TOY, {"episode_length": 2}))
    assert env.episode_length == 2
    assert env.spec.id == "game:Unregistered-v0"


def test_top_level_package_reexports_the_registry_api():
    assert (xpgym.make, xpgym.register, xpgym.spec, xpgym.list_envs) == (
        make,
        register,
        spec,
        list_envs,
    )


# --------------------------------------------------------------------- list_envs


def test_list_envs_is_sorted_and_complete_without_a_pattern():
    register("game:Aaa-v0", TOY)
    assert list_envs() == sorted(reg.registry)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("game:GuessTheNumber-v0-*", ["easy", "hard", "python", "random"]),
        ("*GuessTheNumber*-easy", ["easy"]),
        ("game:GuessTheNumber-v0", [None]),
        ("GAME:*", []),  # case-sensitive
    ],
)
def test_list_envs_filters_by_glob(pattern, expected):
    ids = list_envs(pattern)
    assert [spec(i).variant for i in ids] == expected


# ----------------------------------------------------------------------- make_vec


def test_make_vec_does_not_mutate_the_callers_kwargs():
    shared = {"max_turns": 3}
    per_env = [{"max_turns": 3}, {"max_turns": 4}]
    with make_vec("game:GuessTheNumber-v0", 2, env_kwargs=shared) as vec:
        vec.reset(seed=0)
    with make_vec("game:GuessTheNumber-v0", 2, env_kwargs=per_env) as vec:
        vec.reset(seed=0)
    assert shared == {"max_turns": 3}
    assert per_env == [{"max_turns": 3}, {"max_turns": 4}]


def test_make_vec_repeats_one_id_num_envs_times():
    with make_vec("game:GuessTheNumber-v0", 3) as vec:
        assert vec.num_envs == 3


def test_make_vec_fails_fast_on_an_unknown_id():
    with pytest.raises(UnknownEnvError):
        make_vec(["game:GuessTheNumber-v0", "game:Nope-v0"])


def test_make_vec_rejects_num_envs_that_disagrees_with_the_ids():
    with pytest.raises(ValueError, match="num_envs=3 but 2 env ids"):
        make_vec(["game:GuessTheNumber-v0"] * 2, 3)


def test_make_vec_refuses_a_multi_agent_env():
    with pytest.raises(TypeError, match=r"single-agent envs.*MultiAgentEnv"):
        make_vec("multiagent:TicTacToe-v0", 2)


def test_make_vec_rejects_a_wrong_number_of_kwargs_mappings():
    with pytest.raises(ValueError, match="1 env_kwargs mappings for 2 sub-envs"):
        make_vec("game:GuessTheNumber-v0", 2, env_kwargs=[{}])


def test_make_vec_rejects_an_unknown_vectorization_mode():
    with pytest.raises(ValueError, match="vectorization_mode must be one of"):
        make_vec("game:GuessTheNumber-v0", 2, vectorization_mode="gpu")


def test_make_vec_rejects_zero_sub_envs():
    with pytest.raises(ValueError, match="at least one sub-env"):
        make_vec([])


# ------------------------------------------------------------------ import cost

_IMPORT_PROBE = """
import logging, sys
root_handlers = list(logging.getLogger().handlers)
import xpgym
heavy = sorted(
    m for m in sys.modules
    if m.split(".")[0] in {
        "torch", "transformers", "datasets", "reasoning_gym", "vllm", "verl", "openrlhf",
        "oat", "roll", "rl2", "ray", "tantivy", "mcp",
    }
)
print(__import__("json").dumps({
    "heavy": heavy,
    "new_root_handlers": len(logging.getLogger().handlers) - len(root_handlers),
    "env_modules": sorted(m for m in sys.modules if m.startswith("xpgym.envs.games.")),
    "remote_modules": sorted(m for m in sys.modules if m.startswith("xpgym.remote.")),
}))
"""


@pytest.fixture(scope="module")
def import_probe() -> tuple[dict, str]:
    """Import xpgym in a fresh interpreter; return its report and its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout), done.stderr


def test_import_xpgym_imports_no_heavy_framework(import_probe):
    assert import_probe[0]["heavy"] == []


def test_import_xpgym_installs_no_root_logging_handler(import_probe):
    assert import_probe[0]["new_root_handlers"] == 0


def test_import_xpgym_imports_no_env_module(import_probe):
    assert import_probe[0]["env_modules"] == []


def test_import_xpgym_imports_neither_the_remote_client_nor_the_server(import_probe):
    assert import_probe[0]["remote_modules"] == []


def test_import_xpgym_prints_nothing():
    done = subprocess.run(
        [sys.executable, "-c", "import xpgym"], capture_output=True, text=True, check=True
    )
    assert (done.stdout, done.stderr) == ("", "")


def test_make_builds_a_registered_multi_agent_env():
    from xpgym.core.checks import check_multiagent_env
    from xpgym.core.multiagent import MultiAgentEnv

    register("test:CountGame-v0", "toy_multiagent:CountGame", num_agents=2)
    env = make("test:CountGame-v0")
    assert isinstance(env, MultiAgentEnv)
    assert env.spec.id == "test:CountGame-v0"
    assert env.possible_agents == ["p0", "p1"]
    check_multiagent_env(env)


def test_a_missing_optional_dependency_names_the_extra_to_install():
    from xpgym.core.optional import import_optional

    with pytest.raises(ImportError, match=r"Thing needs no_such_module_x; install it with pip"):
        import_optional("no_such_module_x", needed_by="Thing", install='pip install "xpgym[x]"')
    assert import_optional("json", needed_by="Thing", install="-") is json
