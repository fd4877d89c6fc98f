-- Health of a flagplane FeatureFlagRolloutPolicy. Its status follows kstatus
-- (sigs.k8s.io/cli-utils/pkg/kstatus) as every flagplane kind's does: of
-- the conditions Ready, Reconciling and Stalled exactly one is True, and
-- each carries the observedGeneration it judged. A completed rollout is
-- Ready, a halted or aborted one (or a policy not accepted) is Stalled,
-- a running one is Reconciling. A running rollout that waits for a person
-- (Reconciling's reason AwaitingApproval: `flagplane rollout promote`; or
-- Paused: spec.paused) is Suspended, as Argo CD shows a paused Argo
-- Rollout. Other condition types (Accepted, Progressing) are details.
-- Only Lua's base library is used: the script needs no useOpenLibs.
local hs = {}
local generation = obj.metadata.generation
if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for flagplane to write the status"
  return hs
end
local notObserved = "Waiting for flagplane to observe generation " .. tostring(generation)
if generation == nil or obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = notObserved
  return hs
end
local ready = nil
local reconciling = nil
local stalled = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Reconciling" then
      reconciling = condition
    elseif condition.type == "Stalled" then
      stalled = condition
    end
  end
end
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for flagplane to set the Ready condition"
  return hs
end
if ready.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = notObserved
  return hs
end
if reconciling ~= nil and reconciling.status == "True" then
  if reconciling.reason == "AwaitingApproval" or reconciling.reason == "Paused" then
    hs.status = "Suspended"
  else
    hs.status = "Progressing"
  end
  hs.message = reconciling.message
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
hs.status = "Progressing"
hs.message = ready.message
return hs
