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
