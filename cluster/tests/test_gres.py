from cluster.records.gres import gpu_groups, parse_gres, parse_index_list, parse_tres, shard_totals


def test_index_lists():
    assert parse_index_list("0-1,3") == (0, 1, 3)
    assert parse_index_list("N/A") == ()
    assert parse_index_list("") == ()


def test_gres_with_socket_and_index_annotations():
    items = parse_gres("gpu:a100:4(S:0),shard:a100:40(S:0)")
    assert [(i.name, i.gres_type, i.count) for i in items] == [("gpu", "a100", 4), ("shard", "a100", 40)]


def test_gpu_groups_report_used_indexes():
    groups = gpu_groups("gpu:a100:4(S:0),shard:a100:40(S:0)", "gpu:a100:2(IDX:1,3),shard:a100:0(0/10,0/10,0/10,0/10)")
    assert len(groups) == 1
    assert groups[0].gpu_type == "a100"
    assert groups[0].count == 4
    assert groups[0].used_indexes == (1, 3)


def test_untyped_gres_and_commas_inside_parentheses():
    groups = gpu_groups("gpu:2", "gpu:1(IDX:0)")
    assert groups[0].gpu_type == "" and groups[0].count == 2 and groups[0].used == 1
    assert shard_totals("shard:a100:40(S:0-1)", "shard:a100:3(0/10,3/10,0/10,0/10)") == (40, 3)


def test_tres_strings_normalise_memory_to_megabytes():
    tres = parse_tres("cpu=2,mem=2G,node=1,billing=2,gres/gpu=1,gres/gpu:a100=1")
    assert tres == {"cpu": 2, "mem": 2048, "node": 1, "billing": 2, "gres/gpu": 1, "gres/gpu:a100": 1}


def test_job_gpu_indexes_for_whole_gpus_and_shards():
    from cluster.records.gres import job_gpu_indexes

    assert job_gpu_indexes("gpu:a100:2(IDX:1-2)") == (1, 2)
    assert job_gpu_indexes("shard:a100:3(3/10,0/10,0/10,0/10)") == (0,)
    assert job_gpu_indexes("shard:a100:12(10/10,2/10,0/10,0/10)") == (0, 1)
    assert job_gpu_indexes("") == ()


def test_hostlists_expand_in_order():
    from cluster.records.hostlist import expand_hostlist

    assert expand_hostlist("gpu-a100-[01-02,04],gpu-h100-01") == [
        "gpu-a100-01",
        "gpu-a100-02",
        "gpu-a100-04",
        "gpu-h100-01",
    ]
    assert expand_hostlist("n[8-10]") == ["n8", "n9", "n10"]
    assert expand_hostlist("") == []
