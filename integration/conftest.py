import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import Server  # noqa: E402


@pytest.fixture
def server():
    with Server() as s:
        yield s


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()


# --- RL_BACKEND=functions: the tests that cannot apply to the library -------
# Each with the clause of SPEC.md that exempts it (pytest -rs prints them).
ZONES = ("RL.QUOTA zones with daylight saving: SPEC 'The Functions library', not covered "
         "(the library computes UTC and fixed offsets)")
ACL = ("ACL rules naming RL commands, @ratelimit and the module's ACL categories: SPEC 'The Functions "
       "library', not covered (users need FCALL/FCALL_RO and the keys)")
INFO = "INFO ratelimit counters: SPEC 'The Functions library', not covered (the INFO section)"
CONFIG = "CONFIG ratelimit.* parameters: SPEC 'The Functions library', not covered (CONFIG parameters)"
MODULE = "loads, unloads or inspects the module binary itself: there is no module on this backend"
STREAM = ("the replication stream's exact native commands (SPEC 'Replication and persistence' for the module); "
          "SPEC 'The Functions library': writes are replicated by effect, a replica or AOF holds what the "
          "primary holds (the replica, AOF and differential tests check that)")
FROZEN = ("'*' frozen across MULTI/EXEC and scripts: SPEC 'The Functions library', not covered "
          "(a function reads TIME when it runs)")
OOM = ("the OOM error after argument errors, counted in INFO, inside MULTI and scripts: SPEC 'The Functions "
       "library' (an admission above maxmemory gets Redis's own OOM error, which Redis gives before any "
       "function runs; refunds go through rl_refund, flagged allow-oom)")
CLIENTS = ("sends RL.X through a client package, redis-cli or a docs transcript, which the test-side rewrite "
           "does not reach (the clients on the library: issue 39)")
SCRIPTS = "a Lua script that calls RL.X with redis.call: a script cannot call a function"
GETKEYS = ("COMMAND GETKEYS/INFO/DOCS of the rl.* commands: the library's keys are FCALL's numkeys "
           "(SPEC 'The Functions library': FCALL's own numkeys errors)")
BIG = ("replies above 2^53 (here a retry_after past a window of 2^53-1 ms): a Lua number carries integers "
       "exactly up to 2^53 (SPEC 'The Functions library', not covered, names those after extreme DEBITs)")

NOT_FOR_FUNCTIONS = {
    "test_acl.py": ACL,
    "test_acl_categories.py": ACL,
    "test_configuration.py": CONFIG,
    "test_hot_upgrade.py": MODULE,
    "test_name_clash.py": MODULE,
    "test_valgrind_clean.py": MODULE,
    "test_make_run.py": MODULE,
    "test_docs.py": CLIENTS,
    "test_docs_node.py": CLIENTS,
    "test_docs_recipes.py": CLIENTS,
    "test_cluster_clients.py": CLIENTS,
    "test_app.py::test_app_redis_cli_readme_commands": CLIENTS,
    "test_adversarial.py::test_f2_many_rules_are_refused_by_the_cap_in_linear_time": INFO,
    "test_adversarial.py::test_multi_exec_and_lua_give_the_plain_replies_and_replicate": SCRIPTS,
    "test_adversarial.py::test_replica_and_aof_match_after_transactions_scripts_and_extremes": SCRIPTS,
    "test_adversarial.py::test_f4_module_refuses_to_load_without_a_replicated_command": MODULE,
    "test_adversarial.py::test_f5_write_only_permission_on_lock_key_cannot_read_its_ttl": ACL,
    "test_adversarial.py::test_oom_refusals_are_counted_as_errors_and_write_nothing": OOM,
    "test_adversarial.py::test_module_unload_reload_swapdb_debug_reload_and_pause": MODULE,
    "test_clock_and_memory.py::test_issue_example_two_throttles_in_one_transaction": FROZEN,
    "test_clock_and_memory.py::test_multi_calls_share_redis_expiry_time": FROZEN,
    "test_clock_and_memory.py::test_eval_calls_share_redis_expiry_time": FROZEN,
    "test_clock_and_memory.py::test_fcall_calls_share_redis_expiry_time": FROZEN,
    "test_clock_and_memory.py::test_admissions_refused_above_maxmemory_with_redis_error": OOM,
    "test_clock_and_memory.py::test_argument_errors_come_before_the_oom_error": OOM,
    "test_clock_and_memory.py::test_the_rule_holds_inside_multi_and_scripts": OOM,
    "test_cluster.py::test_quota_lands_on_owning_node": ZONES,
    "test_cluster.py::test_two_keys_in_different_slots_are_crossslot": INFO,
    "test_cluster.py::test_all_keys_in_different_slots_are_crossslot": INFO,
    "test_cluster.py::test_all_command_getkeys_info_docs": GETKEYS,
    "test_cluster.py::test_command_getkeys_info_docs": GETKEYS,
    "test_counters_layouts_and_events.py::test_peek_matches_exact_spec_on_adversarial_layouts": BIG,
    "test_replication.py::test_rejections_and_errors_replicate_nothing": STREAM,
    "test_replication.py::test_stream_carries_native_effects_with_absolute_times": STREAM,
    "test_replication.py::test_debits_and_reservations_replicate_as_admissions": STREAM,
    "test_replication.py::test_lease_stream_carries_native_effects": STREAM,
    "test_replication.py::test_all_stream_carries_each_clauses_native_effects": STREAM,
    "test_replication.py::test_aof_written_with_module_loads_without_it": STREAM,
    "test_replication.py::test_transactions_scripts_and_other_dbs_replicate_effects": SCRIPTS,
}


def pytest_collection_modifyitems(config, items):
    from servers import FUNCTIONS
    if not FUNCTIONS:
        return
    for item in items:
        path = item.nodeid.split("integration/", 1)[-1].split("[", 1)[0]
        for prefix, reason in NOT_FOR_FUNCTIONS.items():
            if path == prefix or path.startswith(prefix + "::") or path.split("::")[0] == prefix:
                item.add_marker(pytest.mark.skip(reason=f"not applicable to the Functions library: {reason}"))
                break
