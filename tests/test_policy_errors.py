"""Every class of policy error is reported with its place (file:line:col, object, JSON path),
all of them at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import PolicyLoadError
from engine.policy.policyset import load_policy_set
from engine.policy.source import policy_files
from tests.conftest import configmap_volume, policy_doc, queue_doc


def only(issues, fragment):
    found = [i for i in issues if fragment in i.message]
    assert len(found) == 1, f"expected one issue with {fragment!r}, got {issues}"
    return found[0]


def test_schema_violation_names_field_and_position(write, load_issues):
    path = write("q.yaml", queue_doc("a", "strategy: Fifo\nweight: 0"))
    issues = load_issues()
    strategy = only(issues, "'Fifo' is not one of")
    assert (strategy.file, strategy.line, strategy.column) == (str(path), 6, 13)
    assert strategy.obj == "Queue/a"
    assert strategy.path == "spec.strategy"
    weight = only(issues, "less than or equal to the minimum")
    assert (weight.line, weight.path) == (7, "spec.weight")


def test_unknown_field_points_at_the_key_and_suggests(write, load_issues):
    write("q.yaml", queue_doc("a", "wieght: 2"))
    issue = only(load_issues(), "unknown field 'wieght'")
    assert "did you mean 'weight'" in issue.message
    assert (issue.line, issue.column, issue.path) == (6, 3, "spec.wieght")


def test_invalid_quantity(write, load_issues):
    write("q.yaml", queue_doc("a", 'guarantee:\n  nvidia.com/gpu: "8GB"\n  cpu: 4'))
    issue = only(load_issues(), "'8GB' is not a quantity")
    assert issue.path == 'spec.guarantee["nvidia.com/gpu"]'
    assert (issue.line, issue.column) == (7, 21)


def test_negative_quantity(write, load_issues):
    write("q.yaml", queue_doc("a", "max:\n  cpu: -1"))
    assert only(load_issues(), "may not be negative").path == "spec.max.cpu"


def test_cel_syntax_error_has_column_inside_expression(write, load_issues):
    path = write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            tenant: job.labels[ == "x"
            """,
        ),
    )
    issue = only(load_issues(), "CEL syntax error")
    # the expression starts at column 11; the bad token `==` is its 13th character
    assert (issue.file, issue.line, issue.column) == (str(path), 6, 23)
    assert issue.path == "spec.tenant"
    assert "^" in issue.message


def test_cel_type_error_in_literal_block_points_into_the_block(write, load_issues):
    write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            queue: |
              job.namespace == "x"
                ? job.lables["q"] : "default"
            """,
        ),
    )
    issue = only(load_issues(), "lables")
    assert "did you mean 'labels'" in issue.message
    assert (issue.line, issue.column) == (8, 13)


def test_cel_result_type_must_match_the_field(write, load_issues):
    write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            priority: '"high"'
            placement:
              filters:
                - name: f
                  expression: cluster.free["nvidia.com/gpu"] - 8 >= job.total["nvidia.com/gpu"]
            """,
        ),
    )
    issues = load_issues()
    assert only(issues, "expected int").path == "spec.priority"
    mixed = only(issues, "double - int")
    assert mixed.path == "spec.placement.filters[0].expression"
    assert "write 8.0" in mixed.message


def test_duplicate_names_across_files(write, load_issues):
    first = write("a.yaml", queue_doc("gpu"))
    write("b.yaml", queue_doc("gpu"))
    issue = only(load_issues(), "duplicate name")
    assert issue.file.endswith("b.yaml")
    assert f"{first}:1" in issue.message
    assert issue.path == "metadata.name"


def test_duplicate_yaml_key_is_not_silently_collapsed(write, load_issues):
    write("q.yaml", queue_doc("a", "weight: 1\nweight: 2"))
    issue = only(load_issues(), "duplicate key 'weight'")
    assert issue.line == 7


def test_unknown_parent(write, load_issues):
    write("q.yaml", queue_doc("child", "parent: nobody"))
    issue = only(load_issues(), "unknown parent queue 'nobody'")
    assert (issue.obj, issue.path, issue.line) == ("Queue/child", "spec.parent", 6)


def test_cyclic_parents_are_reported_on_each_queue(write, load_issues):
    write(
        "q.yaml",
        queue_doc("a", "parent: b")
        + "---\n"
        + queue_doc("b", "parent: c")
        + "---\n"
        + queue_doc("c", "parent: a")
        + "---\n"
        + queue_doc("d", "parent: a"),
    )
    cycles = [i for i in load_issues() if "cycle" in i.message]
    assert sorted(i.obj for i in cycles) == ["Queue/a", "Queue/b", "Queue/c"]
    assert all("a → b → c → a" in i.message for i in cycles)


def test_guarantee_above_max(write, load_issues):
    write("q.yaml", queue_doc("a", "guarantee:\n  nvidia.com/gpu: 16\nmax:\n  nvidia.com/gpu: 8"))
    issue = only(load_issues(), "exceeds max")
    assert issue.message == "guarantee 16 nvidia.com/gpu exceeds max 8"
    assert issue.path == 'spec.guarantee["nvidia.com/gpu"]'


def test_children_guarantees_exceed_parent(write, load_issues):
    write(
        "q.yaml",
        queue_doc("parent", "guarantee:\n  cpu: 10")
        + "---\n"
        + queue_doc("x", "parent: parent\nguarantee:\n  cpu: 6")
        + "---\n"
        + queue_doc("y", "parent: parent\nguarantee:\n  cpu: 6000m"),
    )
    issue = only(load_issues(), "children")
    assert issue.obj == "Queue/parent"
    assert "(x, y) are guaranteed 12 cpu in all" in issue.message


def test_more_than_one_scheduling_policy(write, load_issues):
    write("a.yaml", policy_doc("SchedulingPolicy", "one", "tenant: job.namespace"))
    write("b.yaml", policy_doc("SchedulingPolicy", "two", "tenant: job.namespace"))
    issue = only(load_issues(), "more than one SchedulingPolicy")
    assert issue.obj == "SchedulingPolicy/two"


def test_yaml_syntax_error_has_position(write, load_issues):
    path = write("bad.yaml", "apiVersion: fleetgate.io/v1alpha1\nkind: [Queue\n")
    issue = only(load_issues(), "YAML syntax")
    assert issue.file == str(path)
    assert issue.line >= 2


def test_wrong_api_version_and_kind(write, load_issues):
    write("a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    write("b.yaml", "apiVersion: fleetgate.io/v1alpha1\nkind: Quota\nmetadata:\n  name: x\n")
    issues = load_issues()
    assert only(issues, "apiVersion must be").file.endswith("a.yaml")
    assert only(issues, "unknown kind 'Quota'").file.endswith("b.yaml")


def test_all_errors_are_reported_at_once_in_file_order(write, load_issues):
    write("a.yaml", queue_doc("a", "wieght: 2\nparent: nobody"))
    write("b.yaml", queue_doc("b", "guarantee:\n  cpu: 2\nmax:\n  cpu: 1"))
    issues = load_issues()
    assert [i.file.rsplit("/", 1)[1] for i in issues] == ["a.yaml", "b.yaml"]
    # the unknown field made Queue/a invalid, so its parent is not checked: one issue each
    assert len(issues) == 2


def test_issue_string_format(write, load_issues):
    path = write("q.yaml", queue_doc("a", "strategy: Fifo"))
    text = str(only(load_issues(), "Fifo"))
    assert text.startswith(f"{path}:6:13: Queue/a: spec.strategy: ")


def test_missing_path_and_empty_directory(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyLoadError) as info:
        load_policy_set([tmp_path / "missing", tmp_path / "empty"])
    messages = [i.message for i in info.value.issues]
    assert "no such file or directory" in messages
    assert "directory holds no .yaml or .yml file" in messages


def test_a_configmap_volume_is_read_once_through_its_visible_names(tmp_path: Path):
    files = {"a.yaml": queue_doc("a"), "b.yaml": queue_doc("b") + "---\n" + queue_doc("c")}
    volume = configmap_volume(tmp_path / "policies", files, "2025_03_10_10_00_00.123456789")
    assert sorted(p.name for p in volume.iterdir()) == [
        "..2025_03_10_10_00_00.123456789",
        "..data",
        "a.yaml",
        "b.yaml",
    ]

    found, issues = policy_files([volume])
    assert (found, issues) == ([volume / "a.yaml", volume / "b.yaml"], [])
    policies = load_policy_set([volume])  # a duplicate would fail with "duplicate name"
    assert [q.name for q in policies.queues] == ["a", "b", "c"]
    assert policies.files == (str(volume / "a.yaml"), str(volume / "b.yaml"))

    files["a.yaml"] = queue_doc("a", "weight: 5")
    configmap_volume(volume, files, "2025_03_10_10_05_00.987654321")
    updated = load_policy_set([volume])
    assert [q.name for q in updated.queues] == ["a", "b", "c"]
    assert updated.queue("a").weight == 5


def test_hidden_files_and_directories_are_skipped(tmp_path: Path):
    # under a hidden directory of its own: only paths below the given directory count
    policies = tmp_path / ".config" / "policies"
    (policies / ".git").mkdir(parents=True)
    (policies / "q.yaml").write_text(queue_doc("a"))
    (policies / ".editor.swp.yaml").write_text(queue_doc("a", "weight: -1"))
    (policies / ".#q.yaml").write_text(queue_doc("a"))
    (policies / ".git" / "q.yaml").write_text(queue_doc("a"))

    assert policy_files([policies]) == ([policies / "q.yaml"], [])
    assert [q.name for q in load_policy_set([policies]).queues] == ["a"]

    (policies / "q.yaml").unlink()
    with pytest.raises(PolicyLoadError) as info:
        load_policy_set([policies])
    assert [i.message for i in info.value.issues] == ["directory holds no .yaml or .yml file"]


def test_bad_edit_half_valid_is_rejected_whole(write, load_issues):
    """One valid queue next to one broken one: the load fails, nothing is partially returned."""
    write("a.yaml", queue_doc("good"))
    write("b.yaml", queue_doc("bad", "weight: -1"))
    issues = load_issues()
    assert [i.obj for i in issues] == ["Queue/bad"]


def test_cel_errors_are_reported_even_when_the_schema_fails(write, load_issues):
    write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            tenant: job.nme
            placement:
              strategy: Packed
            """,
        ),
    )
    issues = load_issues()
    assert only(issues, "'Packed' is not one of").path == "spec.placement.strategy"
    assert only(issues, "no field 'nme'").path == "spec.tenant"


def test_duplicate_filter_names(write, load_issues):
    write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            placement:
              filters:
                - {name: gpu, expression: "true"}
                - {name: gpu, expression: "false"}
            """,
        ),
    )
    issue = only(load_issues(), "duplicate filter name 'gpu'")
    assert (issue.path, issue.line) == ("spec.placement.filters[1].name", 9)


def test_empty_value_is_called_null(write, load_issues):
    write("q.yaml", "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata:\n  name: a\nspec:\n")
    issue = only(load_issues(), "null")
    assert (issue.path, issue.message) == ("spec", "is empty (null); expected object")


def test_a_scheduling_expression_that_reads_job_object_is_refused(write, load_issues):
    # the cycle has parsed templates, not raw objects: job.object would always be {} there
    write(
        "s.yaml",
        policy_doc(
            "SchedulingPolicy",
            "s",
            """\
            queue: 'has(job.object.spec) ? "a" : "b"'
            placement:
              filters:
              - {name: f, expression: 'job.object.spec.x == 1 || true'}
            """,
        ),
    )
    issues = [i for i in load_issues() if "job.object is empty here" in i.message]
    assert sorted(i.path for i in issues) == ["spec.placement.filters[0].expression", "spec.queue"]
    assert all(i.obj == "SchedulingPolicy/s" for i in issues)


def test_an_admission_policy_may_read_job_object(write, load_ok):
    write(
        "a.yaml",
        policy_doc(
            "AdmissionPolicy",
            "a",
            """\
            match: 'true'
            validations:
            - {expression: 'has(job.object.spec)', message: needs a spec}
            """,
        ),
    )
    assert load_ok().admission[0].validations[0].expression.source == "has(job.object.spec)"
