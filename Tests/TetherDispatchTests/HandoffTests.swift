import Dispatch
import Synchronization
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
            // Resumed by the start itself (a send with room): no continuation is made.
            let atOnce: [Int] = await awaitHandoff { handoff in handoff.resume(returning: Self.made(round)) }
            #expect(Self.sum(atOnce) == round * (round + 1) / 2)
        }
        await awaitHandoff { handoff in queue.async { handoff.resume() } }
    }

    /// Answers from another thread at any moment around the task's wait: while the start runs,
    /// between its return and the continuation's arrival (the record then finds the answer
    /// there and resumes itself), or after. The answering thread is already running (it spins,
    /// waiting for each call) and the start spins a while after handing it the call, so that
    /// the answer comes anywhere from inside the start to after the wait (in one run: 2,367
    /// during the start, 124 in between, the rest after). Each call gets its own value, once.
    @Test func answersAtAnyMomentAroundTheWaitArriveOnce() async {
        final class Answerer: Sendable {
            // A pthread mutex, which ThreadSanitizer sees (Synchronization's `Mutex` waits on a
            // futex of its own, unseen: TSan would report the call passed through it).
            let pending = PThreadLocked<(Handoff<[Int]>, Int)?>(nil)
            let stop = Atomic(false)
        }
        let answerer = Answerer()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            while !answerer.stop.load(ordering: .acquiring) {
                guard
                    let (handoff, round) = answerer.pending.withLock({ pending in
                        defer { pending = nil }
                        return pending
                    })
                else { continue }
                var spin = (round * 7_919) % 300
                while spin > 0 { spin -= 1 }
                handoff.resume(returning: Self.made(round % 50))
            }
            done.signal()
        }
        for round in 0..<3_000 {
            let value: [Int] = await awaitHandoff { handoff in
                answerer.pending.withLock { $0 = (handoff, round) }
                var spin = (round * 31) % 2_000  // a start that takes a while
                while spin > 0 { spin -= 1 }
            }
            #expect(Self.sum(value) == (round % 50) * (round % 50 + 1) / 2)
        }
        answerer.stop.store(true, ordering: .releasing)
        done.wait()
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
