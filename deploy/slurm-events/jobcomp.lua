-- jobcomp.lua: slurmctld's job completion hook for the GPU pool portal (JobCompType=jobcomp/lua,
-- read from the directory of slurm.conf).
--
-- slurmctld calls slurm_jobcomp_log_record in its own process for every job that ends (a
-- pending job cancelled and a requeue included): no program is started, so thousands of ends
-- at once cost slurmctld next to nothing. It leaves one empty file in the spool that
-- gpupool-slurm-event also writes to, named for the event,
--
--     <job id>.<STATE>.jobcomp.<when the job ended, epoch seconds>[.<array job id>_<task index>].u<uid>
--
-- (the array part for an array's task with a record of its own, so the portal can write the
-- task's end at once, as it does a job's; the owner's uid so the forwarder can keep one user's
-- mass change from holding everyone else's events),
-- and gpupool-event-forwarder sends it to the portal. A full or missing spool loses the event,
-- never the job: the portal's polling mirror catches up. Always returns success: a failing
-- completion script must not be Slurm's problem.
local SPOOL = "/var/spool/gpupool-events"

-- slurmctld's base job states (the low byte of job_state; flags such as REQUEUE sit above it).
local STATES = {
    [0] = "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
    "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
}

function slurm_jobcomp_log_record(job)
    local ok, err = pcall(function()
        local id = tonumber(job.job_id)
        if not id or id < 1 then
            return
        end
        local state = STATES[(tonumber(job.job_state) or -1) % 256] or "UNKNOWN"
        local name = string.format("%s/%d.%s.jobcomp", SPOOL, id, state)
        local ended = tonumber(job.end_time)
        if ended and ended > 0 and ended < 1e12 then
            name = name .. string.format(".%d", ended)
        end
        -- An array's pending tasks share one record, whose task index is NO_VAL (0xfffffffe).
        local array_job = tonumber(job.array_job_id)
        local task = tonumber(job.array_task_id)
        if array_job and array_job > 0 and array_job < 1e19 and task and task >= 0 and task < 4294967294 then
            name = name .. string.format(".%d_%d", array_job, task)
        end
        local uid = tonumber(job.user_id)
        if uid and uid >= 0 and uid < 4294967295 then
            name = name .. string.format(".u%d", uid)
        end
        local file = io.open(name, "w")
        if file then
            file:close()
        end
    end)
    if not ok then
        slurm.log_info("gpupool jobcomp.lua: %s", tostring(err))
    end
    return slurm.SUCCESS
end
