"""jobs.submission.spec: every rule, accepted and refused, with the field named in the error. No database."""

import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import QueryDict
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.submission.spec import (
    IMAGE_RE,
    GpuRequest,
    GpuTypeInfo,
    JobSpec,
    SpecError,
    SpecPolicy,
    job_spec_from_dict,
    parse_job_spec,
)
from plans.catalog import PlanSnapshot as Plan
from plans.product_plans import product_plan

FREE, PRO, ENTERPRISE = product_plan("free"), product_plan("pro"), product_plan("enterprise")
DIGEST = "sha256:" + "0123456789abcdef" * 4
GPU_TYPES = {
    "rtx4090": GpuTypeInfo("rtx4090", memory_gb=24, per_node=4, shards_per_gpu=6),
    "a100": GpuTypeInfo("a100", memory_gb=40, per_node=4, shards_per_gpu=10),
    "h100": GpuTypeInfo("h100", memory_gb=80, per_node=2, shards_per_gpu=20),
}
OFFICIAL = ("nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/tensorflow", "pytorch/pytorch", "tensorflow/tensorflow")


def policy(**overrides) -> SpecPolicy:
    fields = {
        "gpu_types": GPU_TYPES,
        "official_images": OFFICIAL,
        "require_digest": False,
        "data_roots": ("/mnt/nvme",),
    }
    fields.update(overrides)
    return SpecPolicy(**fields)


POLICY = policy()


def spec_data(**overrides) -> dict:
    data = {
        "image": "nvcr.io/nvidia/pytorch:24.01-py3",
        "gpu_type": "a100",
        "gpu_count": 1,
        "command": "python train.py --epochs 3",
        "time_limit_minutes": 60,
    }
    for key, value in overrides.items():
        if value is _DROP:
            data.pop(key, None)
        else:
            data[key] = value
    return data


_DROP = object()


def parse(plan: Plan = PRO, pol: SpecPolicy = POLICY, **overrides) -> JobSpec:
    return parse_job_spec(spec_data(**overrides), plan=plan, policy=pol)


def errors_of(plan: Plan = PRO, pol: SpecPolicy = POLICY, data=None, **overrides) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(spec_data(**overrides) if data is None else data, plan=plan, policy=pol)
    return caught.value.errors


def refused(field: str, plan: Plan = PRO, pol: SpecPolicy = POLICY, **overrides) -> str:
    """Parse, expect refusal on `field` (and only there); return its messages joined."""
    errors = errors_of(plan, pol, **overrides)
    assert field in errors, errors
    assert set(errors) == {field}, errors
    return " ".join(errors[field])


# --- A good spec ---------------------------------------------------------------------


def test_a_minimal_spec_is_accepted_with_defaults():
    spec = parse()
    assert spec == JobSpec(
        name="job",
        image="nvcr.io/nvidia/pytorch:24.01-py3",
        gpu=GpuRequest("a100", count=1),
        command="python train.py --epochs 3",
        time_limit_minutes=60,
        data_mount="",
        environment={},
    )
    assert spec.gpu.tres_per_node() == "gres/gpu:a100:1"
    assert spec.gpu.quota_gpus == 1


def test_a_full_spec_is_accepted():
    spec = parse(
        name="resnet-50_v2.1",
        gpu_count=2,
        data_mount="/mnt/nvme/imagenet",
        environment={"EPOCHS": "90", "WANDB_MODE": "offline", "EMPTY": ""},
    )
    assert spec.name == "resnet-50_v2.1"
    assert spec.gpu == GpuRequest("a100", count=2)
    assert spec.gpu.tres_per_node() == "gres/gpu:a100:2"
    assert spec.gpu.quota_gpus == 2
    assert spec.data_mount == "/mnt/nvme/imagenet"
    assert spec.environment == {"EPOCHS": "90", "WANDB_MODE": "offline", "EMPTY": ""}


def test_any_command_text_is_kept_verbatim():
    command = 'echo "$HOME" `id` $(whoami); rm -rf / # \n#SBATCH --gres=gpu:8\n\u2028\'"\\'
    assert parse(command=command).command == command


def test_form_data_is_accepted():
    form = QueryDict(mutable=True)
    form.update(
        {
            "csrfmiddlewaretoken": "abc",
            "name": "",
            "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            "gpu_type": "rtx4090",
            "gpu_count": "",
            "gpu_memory_gb": "12",
            "command": "python -c 'print(1)'",
            "time_limit_minutes": "120",
            "data_mount": "",
            "environment": "A=1\r\n\r\n# a comment\r\nB = two=2 \r\n  C=",
        }
    )
    spec = parse_job_spec(form, plan=PRO, policy=POLICY)
    assert spec.name == "job"
    assert spec.gpu == GpuRequest("rtx4090", memory_gb=12, shards=3)
    assert spec.time_limit_minutes == 120
    assert spec.environment == {"A": "1", "B": " two=2 ", "C": ""}


@pytest.mark.parametrize(
    "overrides",
    [
        {"gpu_count": 3},
        {"gpu_count": _DROP, "gpu_memory_gb": 12},
        {"data_mount": "/mnt/nvme/x", "environment": {"A": "b"}, "name": "n"},
    ],
)
def test_to_dict_round_trips(overrides):
    spec = parse(**overrides)
    data = spec.to_dict()
    assert set(data) <= {
        "name",
        "image",
        "gpu_type",
        "gpu_count",
        "gpu_memory_gb",
        "command",
        "time_limit_minutes",
        "data_mount",
        "environment",
    }
    assert ("gpu_count" in data) != ("gpu_memory_gb" in data)
    assert parse_job_spec(data, plan=PRO, policy=POLICY) == spec


@pytest.mark.parametrize(
    "overrides",
    [
        {"gpu_count": 3},
        {"gpu_count": _DROP, "gpu_memory_gb": 12},
        {"data_mount": "/mnt/nvme/x", "environment": {"A": "b"}, "name": "n"},
    ],
)
def test_a_stored_spec_reads_back(overrides):
    spec = parse(**overrides)
    assert job_spec_from_dict(spec.to_dict(), policy=POLICY) == spec


def test_a_stored_spec_is_not_held_to_the_plan_again():
    spec = parse(plan=ENTERPRISE, gpu_type="h100", time_limit_minutes=5000)
    assert job_spec_from_dict(spec.to_dict(), policy=POLICY) == spec


@pytest.mark.parametrize(
    "broken",
    [
        None,
        [],
        {"gpu_type": "tpu"},
        {"gpu_memory_gb": 12},
        {"gpu_count": _DROP},
        {"gpu_count": "2"},
        {"gpu_count": True},
        {"time_limit_minutes": 0},
        {"command": None},
        {"image": 5},
        {"environment": {"A": 1}},
        {"environment": "A=1"},
    ],
)
def test_a_malformed_stored_spec_is_a_value_error(broken):
    if isinstance(broken, dict):
        data = parse().to_dict()
        for key, value in broken.items():
            if value is _DROP:
                data.pop(key)
            else:
                data[key] = value
    else:
        data = broken
    with pytest.raises(ValueError):
        job_spec_from_dict(data, policy=POLICY)


def test_unknown_fields_are_reported_but_the_csrf_token_is_not():
    errors = errors_of(gpu_typ="a100", csrfmiddlewaretoken="x")
    assert errors == {"gpu_typ": ["unknown field"]}


def test_every_error_is_collected_at_once():
    errors = errors_of(
        name="bad name!",
        image="ubuntu:latest",
        gpu_type="tpu",
        command="",
        time_limit_minutes=0,
        data_mount="/etc",
        environment={"PATH": "/tmp"},
        colour="blue",
    )
    assert set(errors) == {
        "name",
        "image",
        "gpu_type",
        "command",
        "time_limit_minutes",
        "data_mount",
        "environment",
        "colour",
    }
    text = str(SpecError(errors))
    for field in errors:
        assert field in text


@pytest.mark.parametrize("data", [None, [], "image=x", 42])
def test_not_a_mapping_is_refused(data):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(data, plan=PRO, policy=POLICY)
    assert "non_field_errors" in caught.value.errors


# --- name --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A.b-c_d", "x" * 64])
def test_good_names(name):
    assert parse(name=name).name == name


@pytest.mark.parametrize("name", ["x" * 65, "has space", "semi;colon", "new\nline", "ünï", "$(id)", 7, ["a"]])
def test_bad_names(name):
    refused("name", name=name)


# --- image -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "ubuntu:22.04",
        "localhost:5000/team/img:v1",
        "registry.example.com:443/a/b/c:1.0_rc-2",
        "ghcr.io/org/my__img.x-y:TAG_9",
        f"ghcr.io/org/img@{DIGEST}",
        f"ghcr.io/org/img:1.0@{DIGEST}",
        "a:" + "t" * 128,
    ],
)
def test_pinned_images_are_accepted(image):
    assert parse(image=image).image == image


@pytest.mark.parametrize("image", ["ubuntu:latest", "nvcr.io/nvidia/pytorch:latest", "ubuntu:LATEST", "ubuntu:Latest"])
def test_latest_is_never_allowed(image):
    assert "latest is never allowed" in refused("image", image=image)


def test_latest_is_refused_even_with_a_digest():
    assert "latest" in refused("image", image=f"ubuntu:latest@{DIGEST}")


@pytest.mark.parametrize("image", ["ubuntu", "nvcr.io/nvidia/pytorch", "localhost:5000/img"])
def test_an_unpinned_image_is_refused(image):
    assert "pin a version" in refused("image", image=image)


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu:22.04\n#SBATCH --gres=gpu:8",
        "ubuntu:22.04\n",
        "ubuntu:22.04\r",
        "ubuntu:22.04;id",
        "ubuntu:$(id)",
        "ubuntu:`id`",
        "ubuntu:22.04 --privileged",
        " ubuntu:22.04",
        "ubuntu:22.04\u2028x",
        "ubuntu:22.04\x00",
        "ubuntu:'22.04'",
        'ubuntu:"22.04"',
        "ubuntu:22.04|sh",
        "ubuntu:22.04&&x",
        "--container-mounts=/:/host",
        "-ubuntu:1",
        "Ubuntu:22.04",
        "nvcr.io/NVIDIA/pytorch:1",
        "/ubuntu:1",
        "ubuntu/:1",
        "ubuntu:-1",
        "ubuntu:.1",
        "ubuntu:" + "t" * 129,
        "ubuntu:1:2",
        "ubuntu@sha256:abc",
        "ubuntu@sha256:" + "A" * 64,
        "ubuntu@sha512:" + "a" * 128,
        "ubuntu@" + "a" * 64,
        "nvcr.io#nvidia/pytorch:1",
        "ubuntu:1#x",
        "ubuntu:１",
        "a" * 290 + ":1234567890",
    ],
)
def test_malformed_images_are_refused(image):
    refused("image", image=image)


@pytest.mark.parametrize("image", [None, "", 5, ["ubuntu:1"], {"a": 1}])
def test_a_missing_or_non_string_image_is_refused(image):
    refused("image", image=image)


def test_image_regex_is_fast_on_hostile_input():
    hostile = ["a" * 299 + "!", "a-" * 149 + "!", "A-" * 149 + "A/", ("a." * 149) + "-", "a_" * 149 + "A"]
    start = time.perf_counter()
    for text in hostile:
        IMAGE_RE.fullmatch(text)
        errors_of(image=text)
    assert time.perf_counter() - start < 1.0


def test_a_digest_is_required_when_the_policy_says_so():
    strict = policy(require_digest=True)
    assert "digest" in refused("image", pol=strict, image="nvcr.io/nvidia/pytorch:24.01-py3")
    for image in (f"nvcr.io/nvidia/pytorch@{DIGEST}", f"nvcr.io/nvidia/pytorch:24.01-py3@{DIGEST}"):
        assert parse(pol=strict, image=image).image == image


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "nvcr.io/nvidia/tensorflow:24.01-tf2-py3",
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "docker.io/pytorch/pytorch:2.3.0",
        "index.docker.io/tensorflow/tensorflow:2.16.1-gpu",
        f"tensorflow/tensorflow@{DIGEST}",
    ],
)
def test_the_free_plan_may_use_official_images(image):
    assert parse(plan=FREE, gpu_type="rtx4090", image=image).image == image


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu:22.04",
        "evil.io/pytorch/pytorch:2.3.0",
        "pytorch/pytorch-evil:2.3.0",
        "nvcr.io/nvidia/pytorch/extra:1",
        "nvcr.io/nvidiax/pytorch:1",
        "docker.io/library/pytorch:1",
        "ghcr.io/pytorch/pytorch:2.3.0",
    ],
)
def test_the_free_plan_refuses_other_images(image):
    assert "official images" in refused("image", plan=FREE, gpu_type="rtx4090", image=image)


def test_paid_plans_may_use_any_pinned_image():
    assert parse(plan=PRO, image="ghcr.io/me/mine:1").image == "ghcr.io/me/mine:1"
    assert parse(plan=ENTERPRISE, image="ghcr.io/me/mine:1").image == "ghcr.io/me/mine:1"


# --- GPUs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gpu_type, memory, shards, tres",
    [
        ("a100", 12, 3, "gres/shard:a100:3"),
        ("rtx4090", 5, 2, "gres/shard:rtx4090:2"),
        ("rtx4090", 4, 1, "gres/shard:rtx4090:1"),
        ("rtx4090", 24, 6, "gres/shard:rtx4090:6"),
        ("a100", 1, 1, "gres/shard:a100:1"),
        ("a100", 40, 10, "gres/shard:a100:10"),
        ("a100", 37, 10, "gres/shard:a100:10"),
        ("h100", 80, 20, "gres/shard:h100:20"),
        ("h100", 9, 3, "gres/shard:h100:3"),
    ],
)
def test_gpu_memory_maps_to_shards_of_one_gpu(gpu_type, memory, shards, tres):
    spec = parse(plan=ENTERPRISE, gpu_type=gpu_type, gpu_count=_DROP, gpu_memory_gb=memory)
    assert spec.gpu == GpuRequest(gpu_type, memory_gb=memory, shards=shards)
    assert spec.gpu.tres_per_node() == tres
    assert spec.gpu.quota_gpus == 1


def test_shards_never_exceed_one_gpu_when_memory_does_not_divide():
    odd = GpuTypeInfo("odd", memory_gb=10, per_node=1, shards_per_gpu=3)
    assert [odd.shards_for(gb) for gb in range(1, 11)] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert GPU_TYPES["a100"].shard_gb == 4


@pytest.mark.parametrize("gpu_type, count", [("rtx4090", 4), ("a100", 4), ("h100", 2), ("h100", 1)])
def test_whole_gpus_up_to_one_node(gpu_type, count):
    spec = parse(plan=ENTERPRISE, gpu_type=gpu_type, gpu_count=count)
    assert spec.gpu.tres_per_node() == f"gres/gpu:{gpu_type}:{count}"


@pytest.mark.parametrize("gpu_type, count", [("rtx4090", 5), ("a100", 5), ("h100", 3), ("a100", 1000)])
def test_too_many_gpus_are_refused(gpu_type, count):
    assert "between 1 and" in refused("gpu_count", plan=ENTERPRISE, gpu_type=gpu_type, gpu_count=count)


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "2.0", "x", None])
def test_bad_gpu_counts_are_refused(count):
    if count is None:
        # None is "not given": then neither count nor memory is there.
        refused("gpu_count", gpu_count=None)
    else:
        refused("gpu_count", gpu_count=count)


@pytest.mark.parametrize("gpu_type, memory", [("a100", 41), ("rtx4090", 25), ("h100", 81), ("a100", 0), ("a100", -4)])
def test_more_memory_than_one_gpu_holds_is_refused(gpu_type, memory):
    message = refused("gpu_memory_gb", plan=ENTERPRISE, gpu_type=gpu_type, gpu_count=_DROP, gpu_memory_gb=memory)
    assert "between 1 and" in message


def test_count_and_memory_together_are_refused():
    errors = errors_of(gpu_count=1, gpu_memory_gb=12)
    assert set(errors) == {"gpu_count", "gpu_memory_gb"}
    assert "not both" in errors["gpu_count"][0]


def test_neither_count_nor_memory_is_refused():
    assert "gpu_memory_gb" in refused("gpu_count", gpu_count=_DROP)
    assert "gpu_memory_gb" in refused("gpu_count", gpu_count="", gpu_memory_gb="")


@pytest.mark.parametrize("gpu_type", ["tpu", "A100", "a100 ", "", None, 3, "rtx4090\n"])
def test_unknown_gpu_types_are_refused(gpu_type):
    refused("gpu_type", gpu_type=gpu_type)


@pytest.mark.parametrize("plan, gpu_type", [(FREE, "a100"), (FREE, "h100"), (PRO, "h100")])
def test_gpu_types_not_on_the_plan_are_refused(plan, gpu_type):
    assert "not available on your plan" in refused("gpu_type", plan=plan, gpu_type=gpu_type)


def test_a_zero_quota_means_not_on_the_plan():
    plan = product_plan("pro", code="custom", name="Custom", gpu_quota={"a100": 0})
    assert "not available on your plan" in refused("gpu_type", plan=plan)


def test_count_is_still_checked_when_the_gpu_type_is_wrong():
    errors = errors_of(gpu_type="tpu", gpu_count="many")
    assert set(errors) == {"gpu_type", "gpu_count"}


def test_tres_per_node_refuses_an_empty_or_odd_request():
    with pytest.raises(ValueError):
        GpuRequest("a100").tres_per_node()
    with pytest.raises(ValueError):
        GpuRequest("a100,gpu:h100", count=1).tres_per_node()


# --- time limit --------------------------------------------------------------------------


def test_plan_maximum_time_limits():
    # The plan rows carry their maximum (docs/product.md's plans as seeded).
    assert (FREE.max_job_minutes, PRO.max_job_minutes, ENTERPRISE.max_job_minutes) == (240, 1440, 10080)
    assert parse(plan=FREE, gpu_type="rtx4090", time_limit_minutes=240).time_limit_minutes == 240
    assert "between 1 and 240" in refused("time_limit_minutes", plan=FREE, gpu_type="rtx4090", time_limit_minutes=241)
    assert parse(plan=PRO, time_limit_minutes=1440).time_limit_minutes == 1440
    refused("time_limit_minutes", plan=PRO, time_limit_minutes=1441)
    assert parse(plan=ENTERPRISE, time_limit_minutes=10080).time_limit_minutes == 10080
    refused("time_limit_minutes", plan=ENTERPRISE, time_limit_minutes=10081)
    other = product_plan("pro", code="custom", name="Custom", gpu_quota={"a100": 1})
    assert parse(plan=other, time_limit_minutes=1440).time_limit_minutes == 1440
    refused("time_limit_minutes", plan=other, time_limit_minutes=1441)


@pytest.mark.parametrize("value, expected", [(1, 1), ("1", 1), ("0060", 60), (1440, 1440)])
def test_good_time_limits(value, expected):
    assert parse(time_limit_minutes=value).time_limit_minutes == expected


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        -(10**30),
        10**12,
        10**400,
        "9" * 5000,
        1.5,
        2.0,
        float("nan"),
        float("inf"),
        True,
        False,
        "1.5",
        "-5",
        "+5",
        " 10",
        "10 ",
        "1e3",
        "0x10",
        "ten",
        "١٢",
        "１２",
        [],
        {},
        [60],
        None,
        "",
    ],
)
def test_bad_time_limits_are_refused(value):
    refused("time_limit_minutes", time_limit_minutes=value)


def test_a_missing_time_limit_is_refused():
    assert "required" in refused("time_limit_minutes", time_limit_minutes=_DROP)


# --- command -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [_DROP, None, "", "   ", "\n\t", 42, ["ls"], {"cmd": "ls"}])
def test_a_missing_or_non_string_command_is_refused(command):
    refused("command", command=command)


def test_a_command_with_nul_is_refused():
    assert "NUL" in refused("command", command="echo a\x00b")


def test_a_command_with_lone_surrogates_is_refused():
    refused("command", command="echo \ud800")


def test_command_size_is_counted_in_utf8_bytes():
    assert len(parse(command="x" * 65536).command) == 65536
    refused("command", command="x" * 65537)
    refused("command", command="é" * 32769)  # 65538 bytes
    assert "at most 65536 bytes" in refused("command", command="x" * (1 << 20))  # 1 MB
    small = policy(max_command_bytes=10)
    assert parse(pol=small, command="0123456789").command == "0123456789"
    refused("command", pol=small, command="01234567890")


# --- data mount --------------------------------------------------------------------------


@pytest.mark.parametrize("mount", ["/mnt/nvme", "/mnt/nvme/x", "/mnt/nvme/a.b/c-d_e/..f", "/mnt/nvme/.cache"])
def test_data_mounts_under_a_root_are_accepted(mount):
    assert parse(data_mount=mount).data_mount == mount


@pytest.mark.parametrize("mount", [None, "", _DROP])
def test_no_data_mount(mount):
    assert parse(data_mount=mount).data_mount == ""


def test_any_of_several_roots():
    two = policy(data_roots=("/mnt/nvme", "/scratch/shared"))
    assert parse(pol=two, data_mount="/scratch/shared/d").data_mount == "/scratch/shared/d"


@pytest.mark.parametrize(
    "mount",
    [
        "/mnt/nvme/../etc",
        "/mnt/nvme/..",
        "/mnt/nvme/x/../../../etc/passwd",
        "/mnt/nvme2/x",
        "/mnt/nvmex",
        "/mnt/nvme/",
        "/mnt/nvme/x/",
        "/mnt/nvme/./x",
        "/mnt/nvme/.",
        "//mnt/nvme/x",
        "/mnt//nvme/x",
        "/mnt/nvme//x",
        "mnt/nvme/x",
        "./mnt/nvme",
        "/etc",
        "/",
        "/mnt",
        "/mnt/nvme/a b",
        "/mnt/nvme/x\n",
        "/mnt/nvme/x\nSBATCH",
        "/mnt/nvme/x\x00",
        "/mnt/nvme/x:/etc",
        "/mnt/nvme/a,/etc:/data2",
        "/mnt/nvme/$(id)",
        "/mnt/nvme/`id`",
        "/mnt/nvme/ü",
        "/mnt/nvme/x\u2028",
        "~/data",
        "/mnt/nvme/" + "x" * 2000,
        5,
        ["/mnt/nvme"],
    ],
)
def test_data_mounts_that_escape_or_are_malformed_are_refused(mount):
    refused("data_mount", data_mount=mount)


def test_no_data_roots_means_no_data_mounts():
    assert "none" in refused("data_mount", pol=policy(data_roots=()), data_mount="/mnt/nvme/x")


# --- environment -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "SLURM_JOB_ID",
        "SLURM_",
        "SLURMD_NODENAME",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PATH",
        "GPUPOOL_COMMAND",
        "ENROOT_ROOTFS",
        "PYXIS_VERSION",
        "BASH_ENV",
        "BASH_FUNC_x%%",
        "IFS",
        "SHELLOPTS",
        "CUDA_MPS_PIPE_DIRECTORY",
    ],
)
def test_reserved_environment_names_are_refused(name):
    refused("environment", environment={name: "x"})


@pytest.mark.parametrize("name", ["A", "_", "a_b", "Path", "MY_PATH", "LDFLAGS", "CUDA_HOME", "X" * 64])
def test_plain_environment_names_are_accepted(name):
    assert parse(environment={name: "v"}).environment == {name: "v"}


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A B", "A=B", "A\n", "É", "X" * 65, "$(id)", 5, None])
def test_malformed_environment_names_are_refused(name):
    refused("environment", environment={name: "x"})


def test_environment_values_are_data():
    env = {"A": "world; rm -rf /", "B": "$(id) `id` \"'\\", "C": "line1\nline2\n#SBATCH x", "D": "é" * 2048}
    assert parse(environment=env).environment == env


@pytest.mark.parametrize("value", ["x" * 4097, "é" * 2049, "a\x00b", "\udc80", 5, None, ["x"]])
def test_bad_environment_values_are_refused(value):
    refused("environment", environment={"A": value})


def test_environment_size_limits():
    assert len(parse(environment={f"V{i}": "x" for i in range(64)}).environment) == 64
    assert "at most 64" in refused("environment", environment={f"V{i}": "x" for i in range(65)})
    assert len(parse(environment={"A": "x" * 4096}).environment["A"]) == 4096
    refused("environment", pol=policy(max_env_vars=1), environment={"A": "1", "B": "2"})


def test_environment_as_lines():
    text = "A=1\nB=x=y\n\n   \n# comment\nC=\nD= spaced \r\nE=é"
    assert parse(environment=text).environment == {"A": "1", "B": "x=y", "C": "", "D": " spaced ", "E": "é"}


@pytest.mark.parametrize(
    "text", ["NOEQUALS", "A=1\nA=2", "PATH=/tmp", "1A=x", "A=\x00", "=x", "A B=1", "SLURM_X=1", "A\u2028=1"]
)
def test_bad_environment_lines_are_refused(text):
    refused("environment", environment=text)


@pytest.mark.parametrize("env", [["A=1"], 5, True])
def test_environment_of_another_type_is_refused(env):
    refused("environment", environment=env)


def test_all_environment_problems_are_listed():
    errors = errors_of(environment={"PATH": "x", "1A": "y", "OK": "z", "B": 5})
    assert len(errors["environment"]) == 3


# --- robustness --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
field_values = st.one_of(
    json_values,
    st.sampled_from(["a100", "rtx4090", "h100", "ubuntu:22.04", "/mnt/nvme/x", "1", "12", "A=1\nB=2"]),
)


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.dictionaries(
        st.sampled_from(
            [
                "name",
                "image",
                "gpu_type",
                "gpu_count",
                "gpu_memory_gb",
                "command",
                "time_limit_minutes",
                "data_mount",
                "environment",
                "other",
            ]
        ),
        field_values,
    ),
    plan=st.sampled_from([FREE, PRO, ENTERPRISE]),
)
def test_any_input_gives_a_spec_or_a_spec_error(data, plan):
    try:
        spec = parse_job_spec(data, plan=plan, policy=POLICY)
    except SpecError as exc:
        assert exc.errors and all(isinstance(m, list) and m for m in exc.errors.values())
        return
    assert IMAGE_RE.fullmatch(spec.image)
    assert spec.gpu.gpu_type in plan.gpu_quota
    assert 1 <= spec.time_limit_minutes <= plan.max_job_minutes
    assert spec.gpu.tres_per_node().startswith(("gres/gpu:", "gres/shard:"))


# --- policy from settings ----------------------------------------------------------------


def test_policy_from_settings(settings):
    settings.GPU_TYPES = {"a100": {"label": "NVIDIA A100", "memory_gb": 40, "per_node": 4, "shards_per_gpu": 10}}
    settings.OFFICIAL_IMAGES = ["pytorch/pytorch"]
    settings.REQUIRE_IMAGE_DIGEST = True
    settings.DATA_MOUNT_ROOTS = ["/mnt/nvme", "/scratch"]
    settings.NVME_MAX_GB = 3500
    settings.IMAGE_CATALOGUE_ONLY = False
    pol = SpecPolicy.from_settings()
    assert pol == SpecPolicy(
        gpu_types={"a100": GpuTypeInfo("a100", 40, 4, 10, label="NVIDIA A100")},
        official_images=("pytorch/pytorch",),
        require_digest=True,
        data_roots=("/mnt/nvme", "/scratch"),
        max_nvme_gb=3500,
        images=settings.IMAGE_CATALOGUE,
        catalogue_only=False,
    )


def test_policy_defaults_are_the_dev_cluster(settings):
    # GPU_TYPES is always set (read from deploy/gpu_types.json); the tests here rely on its figures.
    for name in ("OFFICIAL_IMAGES", "REQUIRE_IMAGE_DIGEST", "DATA_MOUNT_ROOTS"):
        delattr(settings, name)
    settings.DEBUG = True
    pol = SpecPolicy.from_settings()

    def figures(types):
        return {name: (t.memory_gb, t.per_node, t.shards_per_gpu) for name, t in types.items()}

    assert figures(pol.gpu_types) == figures(GPU_TYPES)
    assert pol.official_images == OFFICIAL
    assert pol.data_roots == ("/mnt/nvme",)
    assert pol.require_digest is False
    settings.DEBUG = False
    assert SpecPolicy.from_settings().require_digest is True


@pytest.mark.parametrize(
    "name, value",
    [
        ("GPU_TYPES", {"a100": {"label": "A100", "memory_gb": 40, "per_node": 4}}),
        ("GPU_TYPES", {"a100": {"label": "A100", "memory_gb": 0, "per_node": 4, "shards_per_gpu": 10}}),
        ("GPU_TYPES", {"a100": {"label": "A100", "memory_gb": "40", "per_node": 4, "shards_per_gpu": 10}}),
        ("GPU_TYPES", {"A 100": {"label": "A100", "memory_gb": 40, "per_node": 4, "shards_per_gpu": 10}}),
        ("GPU_TYPES", {"a100": {"memory_gb": 40, "per_node": 4, "shards_per_gpu": 10}}),
        ("GPU_TYPES", {"a100": 40}),
        ("GPU_TYPES", {}),
        ("DATA_MOUNT_ROOTS", ["relative"]),
        ("DATA_MOUNT_ROOTS", ["/mnt/nvme/"]),
        ("DATA_MOUNT_ROOTS", ["/"]),
    ],
)
def test_malformed_policy_settings_stop_the_portal(settings, name, value):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured):
        SpecPolicy.from_settings()


def test_policy_from_the_projects_own_settings():
    pol = SpecPolicy.from_settings()
    assert pol.gpu_types and all(isinstance(info, GpuTypeInfo) for info in pol.gpu_types.values())
    assert all(root.startswith("/") for root in pol.data_roots)
