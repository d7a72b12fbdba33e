import Testing
@_spi(TetherInternal) import TetherCore

struct Base64Tests {
    @Test func base64() {
        #expect(Base64.encode([UInt8]()) == "")
        #expect(Base64.encode(Array("f".utf8)) == "Zg==")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.encode(Array("foo".utf8)) == "Zm9v")
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.encode([0xFF, 0xFE]) == "//4=")
    }
}

struct InstantTests {
    @Test func arithmeticSaturates() {
        let start = Instant(nanoseconds: 1_000)
        #expect((start + .seconds(1)).nanoseconds == 1_000_001_000)
        #expect((start - .nanoseconds(500)).nanoseconds == 500)
        #expect(Instant(nanoseconds: 5_000) - start == .nanoseconds(4_000))
        #expect((Instant(nanoseconds: .max) + .seconds(1)).nanoseconds == .max)
        #expect((Instant(nanoseconds: .min) - .seconds(1)).nanoseconds == .min)
        #expect(Instant.zero < start)
    }

    @Test func madeFromDurationsAndSeconds() {
        #expect(Instant(.seconds(90)) == Instant(nanoseconds: 90_000_000_000))
        #expect(Instant(.milliseconds(-5)).nanoseconds == -5_000_000)
        #expect(Instant(seconds: 1.5) == Instant(nanoseconds: 1_500_000_000))
        #expect(Instant(seconds: 1e300).nanoseconds == .max)
        #expect(Instant(seconds: -1e300).nanoseconds == .min)
        #expect(Instant(.seconds(2)).sinceOrigin == .seconds(2))
    }
}

struct UTF8SpanTests {
    /// `withUTF8Span` hands over exactly the string's UTF-8 bytes, for strings held inline (up to
    /// 15 bytes), in storage of their own, and made from a substring, and passes through what
    /// `body` throws. The bytes are read a word at a time where they allow it, as the
    /// serializers read them (an inline string read through a span of a temporary view once gave
    /// garbage that way).
    @Test func spansAreTheStringsBytes() throws {
        let pieces = ["a", "é", "日", "😀", "localhost"]
        var strings: [String] = [""]
        for count in 1...40 { strings.append((0..<count).map { pieces[$0 % pieces.count] }.joined()) }
        strings.append(String("xx-substring-of-a-longer-string-xx".dropFirst(3).dropLast(3)))
        for string in strings {
            let expected = Array(string.utf8)
            let seen: [UInt8] = string.withUTF8Span { span in
                var copy: [UInt8] = []
                var index = 0
                unsafe span.withUnsafeBytes { raw in
                    while index + 8 <= raw.count {
                        let word = unsafe raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                        for shift in stride(from: 0, to: 64, by: 8) {
                            copy.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
                        }
                        index += 8
                    }
                }
                while index < span.count {
                    copy.append(span[index])
                    index += 1
                }
                return copy
            }
            #expect(seen == expected, "\(string)")
        }
        struct Stop: Error {}
        #expect(throws: Stop.self) { try "throws".withUTF8Span { (_: Span<UInt8>) throws(Stop) in throw Stop() } }
    }
}

/// The machines' action queue.
struct ActionQueueTests {
    /// `ActionQueue` keeps its emptied slots between inputs and writes new actions into them:
    /// actions come out in order, once, and each is released once taken and dropped (none kept
    /// alive by a reused slot, none released twice), across drains, slot reuse and a burst
    /// larger than the storage it keeps.
    @Test func anActionQueueReusesItsSlots() {
        final class Token: Sendable {
            let number: Int
            init(_ number: Int) { self.number = number }
        }
        var queue = ActionQueue<Token>()
        var weakTokens: [() -> Token?] = []
        var next = 0
        func append(_ count: Int) {
            for _ in 0..<count {
                let token = Token(next)
                weakTokens.append { [weak token] in token }
                queue.append(token)
                next += 1
            }
        }
        var taken: [Int] = []
        func drain() {
            while let token = queue.next() { taken.append(token.number) }
            #expect(queue.isEmpty)
        }
        append(2)
        drain()
        append(3)  // two reused slots, one new
        #expect(!queue.isEmpty)
        do {
            let first = queue.next()
            #expect(first?.number == 2)
            taken.append(first?.number ?? -1)
        }
        append(1)  // while some are still queued
        drain()
        append(40)  // a burst: its storage is released once drained
        drain()
        append(2)
        drain()
        #expect(taken == Array(0..<next))
        #expect(weakTokens.allSatisfy { $0() == nil })
    }
}
