--[[
job_submit.lua: refuse GPU requests that name no GPU type.
The dev cluster installs it as /etc/slurm/job_submit.lua (slurm.conf: JobSubmitPlugins=lua),
with @GPU_TYPES@ and @EXAMPLE_TYPE@ filled in from deploy/gpu_types.json by
deploy/devcluster/gpu_layout.py. A production cluster can install it the same way.

Why: plan limits are typed TRES (e.g. MaxTRESPerUser=gres/gpu:h100=0 on the free plan's
QOS), and Slurm enforces a typed limit only on typed requests: --gres=gpu:1, --gpus=1 or
--gpus-per-node=1 get any GPU, an h100 included, past the plan. Untyped shards
(--gres=shard:2) likewise. Jobs without GPUs pass.

Returning ESLURM_INVALID_GRES (not slurm.ERROR) gives sbatch the log_user text and REST a
real error number.
]]

local GPU_TYPES = "@GPU_TYPES@"
local EXAMPLE_TYPE = "@EXAMPLE_TYPE@"
-- GRES that plans limit by type.
local TYPED = { gpu = true, shard = true }
-- Every field a GPU request can arrive in (--gres and --gpus-per-node: tres_per_node;
-- --gpus: tres_per_job; --gpus-per-socket, --gpus-per-task / --tres-per-task).
local FIELDS = { "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }

-- The first untyped GPU or shard item of a TRES list, or nil.
-- "gres/gpu:a100:2", "gres/gpu:a100", "gres/gpu:0", "cpu=2" -> nil;
-- "gres/gpu:2", "gres/gpu", "gpu:1", "gres/gpu=1", "gres/shard:3" -> that item.
local function untyped_gpu_item(tres)
    if tres == nil or tres == "" then
        return nil
    end
    for item in string.gmatch(tres, "[^,]+") do
        local body = string.gsub(item, "^gres[/:]", "", 1)
        local parts = {}
        for part in string.gmatch(body, "[^:=]+") do
            parts[#parts + 1] = part
        end
        if TYPED[parts[1]] then
            if #parts == 1 then
                return item
            end
            -- name:count (a count may carry a k/m/g suffix); name:type is typed (count 1).
            local count = parts[2]
            if #parts == 2 and string.match(count, "^%d+[kKmMgGtTpP]?$") and not string.match(count, "^0+$") then
                return item
            end
        end
    end
    return nil
end

local function check(job_desc, uid)
    for _, field in ipairs(FIELDS) do
        local item = untyped_gpu_item(job_desc[field])
        if item then
            slurm.log_info("job_submit/lua: refused %s=%s from uid %s: no GPU type", field, item, tostring(uid))
            slurm.log_user("GPU requests must name a GPU type, and %s names none: ask for a GPU type, "
                .. "e.g. --gres=gpu:%s:1 or --gres=shard:%s:2 (types: %s)",
                item, EXAMPLE_TYPE, EXAMPLE_TYPE, GPU_TYPES)
            return slurm.ESLURM_INVALID_GRES or slurm.ERROR
        end
    end
    return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    return check(job_desc, submit_uid)
end

-- An update of a pending job (scontrol update ... Gres=gpu:1) must not bypass the rule.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return check(job_desc, modify_uid)
end

return slurm.SUCCESS
