// A buffer made on a Dispatch queue is handed to a task by CheckedContinuation.resume, and the
// task reads it: the hand-off HubConnection uses for an invocation's result.
//
// `--resume-first` makes the queue resume the continuation before the task awaits it (the task's
// thread sleeps in the body; a sleep is no synchronisation TSan could see). The runtime then
// takes its fast path: `swift_continuation_await` finds the continuation already resumed and runs
// the task on at once. The resume called `_swift_tsan_release(task)`, but the matching
// `_swift_tsan_acquire(task)` is only made when a suspended task is run from its executor, so on
// the fast path ThreadSanitizer sees no edge and reports the read. The default mode makes the
// task suspend first (the queue waits), and nothing is reported.
//
// The program prints nothing itself; run under ThreadSanitizer it yields reports or none.
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let queue = DispatchQueue(label: "runner")
let resumeFirst = CommandLine.arguments.contains("--resume-first")

@concurrent func roundTrip() async -> [UInt8] {
    await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8], Never>) in
        queue.async {
            if !resumeFirst { usleep(5_000) }  // the task suspends first
            // A fresh buffer, its bytes written here (instrumented code).
            let fresh = [UInt8](unsafeUninitializedCapacity: 8) { buffer, count in
                for index in 0..<8 { buffer[index] = UInt8(index) }
                count = 8
            }
            continuation.resume(returning: fresh)
        }
        if resumeFirst { usleep(5_000) }  // the queue resumes first
    }
}

@concurrent func run() async -> Int {
    var total = 0
    for _ in 0..<50 {
        let bytes = await roundTrip()
        // Read on the task's thread (instrumented code).
        bytes.withUnsafeBufferPointer { buffer in
            for index in 0..<buffer.count { total += Int(buffer[index]) }
        }
    }
    return total
}

let total = await Task.detached { await run() }.value
precondition(total == 50 * 28)
