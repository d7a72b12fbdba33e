import CMallocCounter
import Foundation

/// One row of the results table.
struct BenchmarkResult {
    var name: String
    /// Bytes processed per pass (input for decoders, output for encoders).
    var bytes: Int
    /// Messages (or stanzas) per pass.
    var messages: Int
    /// The fastest pass.
    var seconds: Double
    /// Heap allocations per message in the fastest pass.
    var mallocsPerMessage: Double
    /// Peak resident set size of the process during the benchmark (corpus included), in bytes.
    var peakRSS: Int
    /// A free-form comparison (for example the ratio to a baseline).
    var note: String = ""

    var megabytesPerSecond: Double { Double(bytes) / seconds / 1_000_000 }
    var messagesPerSecond: Double { Double(messages) / seconds }
}

/// Runs `body` `passes` times and keeps the fastest pass; `body` returns a checksum that is
/// folded into `sink` so the optimizer cannot drop the work.
func measure(
    _ name: String,
    bytes: Int,
    messages: Int,
    passes: Int,
    _ body: () throws -> Int
) rethrows -> BenchmarkResult {
    resetPeakResidentSetSize()
    var best = Double.infinity
    var bestMallocs: UInt64 = 0
    for _ in 0..<passes {
        let pass = try timedPass(body)
        if pass.seconds < best {
            best = pass.seconds
            bestMallocs = pass.mallocs
        }
    }
    return BenchmarkResult(
        name: name,
        bytes: bytes,
        messages: messages,
        seconds: best,
        mallocsPerMessage: Double(bestMallocs) / Double(max(messages, 1)),
        peakRSS: peakResidentSetSize()
    )
}

/// Runs several benchmarks pass by pass, alternating between them (first pass of each, then the
/// second of each, …), and keeps each one's fastest pass: for a ratio between two of them, so
/// that a slow spell of the machine hits both alike. Peak RSS is the peak over all of them.
func measureAlternating(
    _ benchmarks: [(name: String, bytes: Int, messages: Int, body: () throws -> Int)],
    passes: Int
) throws -> [BenchmarkResult] {
    resetPeakResidentSetSize()
    var best = Array(repeating: Double.infinity, count: benchmarks.count)
    var bestMallocs = Array(repeating: UInt64(0), count: benchmarks.count)
    for _ in 0..<passes {
        for (index, benchmark) in benchmarks.enumerated() {
            let pass = try timedPass(benchmark.body)
            if pass.seconds < best[index] {
                best[index] = pass.seconds
                bestMallocs[index] = pass.mallocs
            }
        }
    }
    let peak = peakResidentSetSize()
    return benchmarks.indices.map { index in
        BenchmarkResult(
            name: benchmarks[index].name,
            bytes: benchmarks[index].bytes,
            messages: benchmarks[index].messages,
            seconds: best[index],
            mallocsPerMessage: Double(bestMallocs[index]) / Double(max(benchmarks[index].messages, 1)),
            peakRSS: peak
        )
    }
}

/// One run of `body`: its wall-clock time and the heap allocations it made (its checksum goes
/// to `sink`, so that the optimizer cannot drop the work).
func timedPass(_ body: () throws -> Int) rethrows -> (seconds: Double, mallocs: UInt64) {
    let mallocsBefore = tether_malloc_count()
    let start = ContinuousClock.now
    sink &+= try body()
    let elapsed = ContinuousClock.now - start
    let mallocs = tether_malloc_count() - mallocsBefore
    return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, mallocs)
}

/// Where benchmark checksums go.
nonisolated(unsafe) var sink = 0

/// Restarts the peak-RSS measurement (Linux: writing 5 to /proc/self/clear_refs resets VmHWM
/// to the current RSS), so that each benchmark reports its own peak.
func resetPeakResidentSetSize() {
    try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
}

/// The process's peak resident set size (VmHWM), in bytes.
func peakResidentSetSize() -> Int { memoryStatus("VmHWM:") }

/// The current resident set size (VmRSS), in bytes.
func residentSetSize() -> Int { memoryStatus("VmRSS:") }

/// A size in kB from /proc/self/status (the line starting with `field`), in bytes; 0 if unknown.
func memoryStatus(_ field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
        let digits = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return digits * 1024
    }
    return 0
}
