import Dispatch
import Testing

@_spi(TetherInternal) @testable import TetherDispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `Handoff` delivers a value made on another queue whether it is resumed before the task awaits
/// (the runtime's fast path, which a bare continuation hides from ThreadSanitizer) or after; the
/// sanitized run (`Tests/Sanitizers/run.sh`) checks that TSan sees both as ordered.
struct HandoffTests {
    /// 0...n, its elements written here (in instrumented code, as the driver's decoders are).
    static func made(_ n: Int) -> [Int] {
        [Int](unsafeUninitializedCapacity: n + 1) { buffer, count in
            for index in 0...n { buffer[index] = index }
            count = n + 1
        }
    }

    /// The sum of `values`, read here (instrumented code).
    static func sum(_ values: [Int]) -> Int {
        values.withUnsafeBufferPointer { buffer in
            var total = 0
            for index in 0..<buffer.count { total += buffer[index] }
            return total
        }
    }

    @Test func aValueArrivesWhetherResumedBeforeOrAfterTheAwait() async {
        let queue = DispatchQueue(label: "tether.test-handoff")
        for round in 0..<50 {
            // Resumed before the task awaits: the body sleeps while the queue resumes (a sleep,
            // not a wait, so that nothing but the handoff orders the two for TSan).
            let early: [Int] = await awaitHandoff { handoff in
                queue.async { handoff.resume(returning: Self.made(round)) }
                usleep(2_000)
            }
            #expect(Self.sum(early) == round * (round + 1) / 2)
            // Resumed after the task awaits.
            let late: [Int] = await awaitHandoff { handoff in
                queue.asyncAfter(deadline: .now() + .milliseconds(1)) { handoff.resume(returning: Self.made(round)) }
            }
            #expect(Self.sum(late) == round * (round + 1) / 2)
        }
        await awaitHandoff { handoff in queue.async { handoff.resume() } }
    }
}
