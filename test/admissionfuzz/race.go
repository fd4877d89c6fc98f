//go:build race

package admissionfuzz

// RaceDetector tells whether the test binary runs with the race detector,
// which slows it down 5 to 20 times: the webhook timeout is no bound of
// such a run, and the largest inputs are left to the runs without it
// (make fuzz-short, make fuzz).
const RaceDetector = true
