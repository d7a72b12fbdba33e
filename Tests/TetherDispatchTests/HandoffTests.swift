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

    /// An answer larger than the record keeps inline (`RunnerCall.inlineCapacity`), kept in memory
    /// of its own: it arrives whole, resumed before or after the await, and its references are
    /// released once (the array's storage is checked through its elements).
    struct Large: Sendable {
        var values: [Int]
        var first = 1, second = 2, third = 3, fourth = 4, fifth = 5, sixth = 6, seventh = 7, eighth = 8

        var sum: Int { HandoffTests.sum(values) + first + second + third + fourth + fifth + sixth + seventh + eighth }
    }

    @Test func aLargeAnswerArrivesWhole() async {
        #expect(MemoryLayout<Large>.size > RunnerCall.inlineCapacity)
        #expect(!RunnerCall.fits(Large.self))
        #expect(RunnerCall.fits(Result<[Int], TestFailure>.self))
        let queue = DispatchQueue(label: "tether.test-handoff-large")
        for round in 0..<20 {
            let early: Large = await awaitHandoff { handoff in
                queue.async { handoff.resume(returning: Large(values: Self.made(round))) }
                usleep(1_000)
            }
            #expect(early.sum == round * (round + 1) / 2 + 36)
            let late: Large = await awaitHandoff { handoff in
                queue.asyncAfter(deadline: .now() + .milliseconds(1)) {
                    handoff.resume(returning: Large(values: Self.made(round)))
                }
            }
            #expect(late.sum == round * (round + 1) / 2 + 36)
        }
    }

    /// An answer that fits carries its references through the record: the object it holds is
    /// alive in the task and released once after (no copy left behind in the record).
    @Test func anInlineAnswerHoldsItsObjectUntilTheTaskDropsIt() async {
        final class Token: Sendable {}
        final class WeakBox: @unchecked Sendable {
            weak var token: Token?
        }
        let box = WeakBox()
        let queue = DispatchQueue(label: "tether.test-handoff-object")
        do {
            let answer: Result<Token, TestFailure> = await awaitHandoff { handoff in
                queue.async {
                    let token = Token()
                    box.token = token
                    handoff.resume(returning: .success(token))
                }
            }
            queue.sync {}  // the block's own reference is gone
            #expect(box.token != nil)
            _ = try? answer.get()
        }
        #expect(box.token == nil)
    }

    struct TestFailure: Error {}
}
