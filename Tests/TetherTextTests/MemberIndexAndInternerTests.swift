import Testing
@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

struct MemberIndexTests {
    func append(_ index: inout MemberIndex, keyStart: Int, keyLength: Int, valueStart: Int) -> Bool {
        let bytes = Array("xxIdUserIdName".utf8)
        return index.append(
            keyStart: keyStart,
            keyLength: keyLength,
            valueStart: valueStart,
            in: bytes.backDeployedSpan
        )
    }

    @Test func findsMembersAndRefusesWhatDoesNotFit() {
        let bytes = Array("xxIdUserIdName".utf8)
        var index = MemberIndex(base: 2)
        #expect(append(&index, keyStart: 2, keyLength: 2, valueStart: 100))
        #expect(append(&index, keyStart: 4, keyLength: 6, valueStart: 200))
        #expect(append(&index, keyStart: 10, keyLength: 4, valueStart: 300))
        #expect(index.valueStart(forKey: Array("UserId".utf8).span, in: bytes.span) == 200)
        #expect(index.valueStart(forKey: Array("Id".utf8).span, in: bytes.span) == 100)
        #expect(index.valueStart(forKey: Array("Name".utf8).span, in: bytes.span) == 300)
        #expect(index.valueStart(forKey: Array("Nam".utf8).span, in: bytes.span) == nil)
        #expect(index.member(1).key == 4..<10)
        #expect(!append(&index, keyStart: 2, keyLength: 300, valueStart: 10), "key too long")
        #expect(!append(&index, keyStart: 2, keyLength: 1, valueStart: 2 + (1 << 24)), "offset too far")
        #expect(!append(&index, keyStart: 1, keyLength: 1, valueStart: 3), "before the base")
        #expect(!append(&index, keyStart: 2, keyLength: 0, valueStart: 3), "empty key")
        for member in 3..<MemberIndex.capacity {
            #expect(append(&index, keyStart: 2, keyLength: 2, valueStart: member))
        }
        #expect(!append(&index, keyStart: 2, keyLength: 2, valueStart: 1), "full")
        #expect(index.count == MemberIndex.capacity)
    }

    /// Keys are compared a word at a time: every length, a difference in any byte, and keys that
    /// end at the very end of the bytes.
    @Test func keyComparisonSeesEveryByte() {
        func find(_ key: [UInt8], _ index: MemberIndex, _ bytes: [UInt8]) -> Int? {
            index.valueStart(forKey: key.backDeployedSpan, in: bytes.backDeployedSpan)
        }
        for length in 1...40 {
            let key = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            let bytes = [UInt8(ascii: "x")] + key  // the key ends with the bytes
            var index = MemberIndex(base: 0)
            let appended = index.append(keyStart: 1, keyLength: length, valueStart: 0, in: bytes.backDeployedSpan)
            #expect(appended)
            #expect(find(key, index, bytes) == 0, "length \(length)")
            for position in 1..<length {  // position 0 differs in the tag already
                var other = key
                other[position] = UInt8(ascii: "Z")
                #expect(find(other, index, bytes) == nil, "length \(length), byte \(position)")
            }
        }
        // A key that would run past the end of the bytes never matches.
        var index = MemberIndex(base: 0)
        let appended = index.append(keyStart: 1, keyLength: 2, valueStart: 0, in: Array("abc".utf8).backDeployedSpan)
        #expect(appended)
        #expect(find(Array("bc".utf8), index, Array("abc".utf8)) == 0)
        #expect(find(Array("bc".utf8), index, Array("ab".utf8)) == nil)
    }
}

struct StringInternerTests {
    @Test func sharesRecurringStringsAndStaysBounded() {
        var interner = StringInterner(capacity: 4, maximumLength: 8)
        let first = interner.intern(Array("Send".utf8).backDeployedSpan)
        let second = interner.intern(Array("Send".utf8).backDeployedSpan)
        #expect(first == "Send" && second == "Send")
        #expect(interner.intern(Array("a much longer name".utf8).span) == "a much longer name")
        for index in 0..<100 { #expect(interner.intern(Array("n\(index)".utf8).span) == "n\(index)") }
        #expect(interner.intern(Array("Send".utf8).span) == "Send")
        #expect(interner.intern(Array("é".utf8).span) == "é")
    }

    @Test func namesThatShareASlotStillComeBackRight() {
        // The hash reads the first and last eight bytes only: these names collide on purpose.
        var interner = StringInterner(capacity: 64, maximumLength: 64)
        let names = (0..<20).map { "ReceiveMessage\($0 % 10)\($0 / 10)ForTheGroup" } + [""]
        for _ in 0..<3 {
            for name in names { #expect(interner.intern(Array(name.utf8).span) == name) }
        }
        // Every length up to and past a word, with and without a shared prefix.
        for length in 0...20 {
            let name = String(repeating: "x", count: length)
            #expect(interner.intern(Array(name.utf8).span) == name)
            #expect(interner.intern(Array((name + "y").utf8).span) == name + "y")
        }
    }

    @Test func validatingRefusesWhatIsNotUTF8AndTrustsOnlyEqualBytes() {
        var interner = StringInterner(capacity: 64, maximumLength: 16)
        #expect(interner.intern(validating: Array("Send".utf8).span) == "Send")
        #expect(interner.intern(validating: Array("Send".utf8).span) == "Send")  // from the cache
        #expect(interner.intern(validating: Array("Zoë".utf8).span) == "Zoë")
        // Invalid bytes: refused whether or not a string sits in their slot, and never cached.
        let invalid: [[UInt8]] = [
            [0x53, 0x65, 0x6e, 0xff], [0xc3], [0x5a, 0x6f, 0xc3], [0xed, 0xa0, 0x80], [0xc0, 0x80],
            Array("Send".utf8) + [0x80],
        ]
        for bytes in invalid {
            for _ in 0..<2 { #expect(interner.intern(validating: bytes.span) == nil) }
        }
        // The cached strings are still there and the same length but other bytes miss them.
        #expect(interner.intern(validating: Array("Send".utf8).span) == "Send")
        #expect(interner.intern(validating: [0x53, 0x65, 0x6e, 0xe4].span) == nil)
        // Longer than the cache takes: checked, not cached.
        let long = "a name longer than sixteen bytes, é"
        #expect(interner.intern(validating: Array(long.utf8).span) == long)
        #expect(interner.intern(validating: (Array(long.utf8) + [0xff]).span) == nil)
    }
}
