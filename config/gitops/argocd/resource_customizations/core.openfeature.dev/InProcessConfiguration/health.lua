-- Health of a flagplane object. Its status follows kstatus
-- (sigs.k8s.io/cli-utils/pkg/kstatus): of the conditions Ready, Reconciling
-- and Stalled exactly one is True, and each carries the observedGeneration
-- it judged. status.observedGeneration says which generation the status
-- describes. Other condition types (Accepted, Programmed, ...) are details.
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
  hs.status = "Progressing"
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
