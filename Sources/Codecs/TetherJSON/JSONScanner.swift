internal import CTetherText
@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// The kinds of JSON tokens, named as System.Text.Json names them in its error texts.
public enum JSONTokenKind: String {
    /// An object (`{`).
    case object = "StartObject"
    /// An array (`[`).
    case array = "Array"
    /// A string.
    case string = "String"
    /// A number.
    case number = "Number"
    /// `true`.
    case trueLiteral = "True"
    /// `false`.
    case falseLiteral = "False"
    /// `null`.
    case null = "Null"
}

/// A string token: the range of its raw contents (between the quotes) and whether it has escapes.
public struct JSONStringToken {
    /// The string's bytes in the scanned input, without the quotes (escapes not resolved).
    public var contents: Range<Int>
    /// Whether the string holds escapes (`\`), so that its bytes must be unescaped before use.
    public var hasEscapes: Bool
    /// Whether every byte of the contents is ASCII (false when unknown), so that the `String`
    /// made of them is marked ASCII: otherwise its UTF-16 count and offsets take a pass over it.
    var isASCII = false
}

/// Low-level JSON (RFC 8259) scanning over a byte array: validate and skip values, read strings
/// and numbers. Positions are offsets into `bytes`; `end` bounds every read. Failures are
/// reported as `JSONScanner.Failure` and turned into protocol errors by the callers.
public struct JSONScanner {
    /// Thrown when the input is not valid JSON at `position` (the scanner reports where, not why).
    public struct Failure: Error {
        /// A failure.
        public init() {}
    }

    /// The input being scanned.
    public let bytes: [UInt8]
    /// The offset of the next byte to scan.
    public var position: Int
    /// The offset just past the last byte to scan.
    public let end: Int
    @usableFromInline let maximumDepth: Int
    /// Whether the bytes were validated before, so that strings only need their end found.
    @usableFromInline let isValidated: Bool

    /// A scanner over `range` of `bytes`, refusing nesting deeper than `maximumDepth`.
    @inlinable
    public init(_ bytes: [UInt8], range: Range<Int>, maximumDepth: Int) {
        self.bytes = bytes
        self.position = range.lowerBound
        self.end = range.upperBound
        self.maximumDepth = maximumDepth
        self.isValidated = false
    }

    /// A scanner over bytes that an earlier scan validated (no depth limit, fast string skips).
    @inlinable
    public init(validated bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.position = range.lowerBound
        self.end = range.upperBound
        self.maximumDepth = .max
        self.isValidated = true
    }

    @inlinable @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    @inlinable @inline(__always)
    mutating func skipWhitespace() {
        while position < end, Self.isWhitespace(bytes[position]) { position += 1 }
    }

    /// The next non-whitespace byte, or nil at the end (does not consume it).
    @inlinable @inline(__always)
    public mutating func peek() -> UInt8? {
        skipWhitespace()
        return position < end ? bytes[position] : nil
    }

    /// Consumes `byte` if it is next (after whitespace).
    @inlinable @inline(__always)
    public mutating func consume(_ byte: UInt8) -> Bool {
        if peek() == byte {
            position += 1
            return true
        }
        return false
    }

    /// The kind of the next token, or nil if the next byte cannot start a value.
    @inlinable
    public mutating func peekKind() -> JSONTokenKind? {
        guard let byte = peek() else { return nil }
        return switch byte {
        case UInt8(ascii: "{"): .object
        case UInt8(ascii: "["): .array
        case UInt8(ascii: "\""): .string
        case UInt8(ascii: "t"): .trueLiteral
        case UInt8(ascii: "f"): .falseLiteral
        case UInt8(ascii: "n"): .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): .number
        default: nil
        }
    }

    // MARK: - Strings

    /// Reads a string token (validating escapes, control characters and UTF-8 unless the bytes
    /// are already validated); the cursor must be at its quote.
    public mutating func readString() throws(Failure) -> JSONStringToken {
        let (token, next) = try Self.readString(bytes.backDeployedSpan, position, end, validated: isValidated)
        position = next
        return token
    }

    /// `readString` on a span: returns the token and the offset after its closing quote.
    static func readString(
        _ span: Span<UInt8>,
        _ at: Int,
        _ end: Int,
        validated: Bool
    ) throws(Failure) -> (JSONStringToken, Int) {
        guard at < end, span[at] == UInt8(ascii: "\"") else { throw Failure() }
        let start = at + 1
        var index = start
        var hasEscapes = false
        var isASCII = true
        if validated {
            // Plain text a word at a time (most strings end in this first run); from a first
            // escape on, the rest in C, 64 bytes per step with the escapes found by bit scans.
            let run = JSONTextScanning.endOfValidatedJSONText(in: span, from: index, to: end)
            index = run.end
            isASCII = run.bytes & 0x8080_8080_8080_8080 == 0
            guard index < end else { throw Failure() }
            if span[index] != UInt8(ascii: "\"") {
                hasEscapes = true
                var hasHigh: Int32 = 0
                let from = index
                index = unsafe span.withUnsafeBufferPointer { buffer in
                    unsafe tether_json_validated_string_end(buffer.baseAddress, from, end, &hasHigh)
                }
                guard index < end else { throw Failure() }
                if hasHigh != 0 { isASCII = false }
            }
        } else {
            // One pass finds the end, validating escapes on the way and noting control characters
            // (an error) and non-ASCII bytes (then checked as UTF-8).
            var hasNonASCII = false
            while true {
                let run = JSONTextScanning.scanJSONText(in: span, from: index, to: end)
                guard !run.hasControlCharacters, run.end < end else { throw Failure() }
                hasNonASCII = hasNonASCII || run.hasNonASCII
                index = run.end
                if span[index] == UInt8(ascii: "\"") { break }
                hasEscapes = true
                index = try skipEscape(span, index + 1, end)
            }
            if hasNonASCII, UTF8Validation.check(span.extracting(start..<index)) == .invalid { throw Failure() }
            isASCII = !hasNonASCII
        }
        return (JSONStringToken(contents: start..<index, hasEscapes: hasEscapes, isASCII: isASCII), index + 1)
    }

    /// Validates the escape whose letter is at `index`; returns the offset after it.
    static func skipEscape(_ span: Span<UInt8>, _ index: Int, _ end: Int) throws(Failure) -> Int {
        guard index < end else { throw Failure() }
        switch span[index] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return index + 1
        case UInt8(ascii: "u"):
            guard index + 4 < end else { throw Failure() }
            for offset in 1...4 where hexValue(span[index + offset]) == nil { throw Failure() }
            return index + 5
        default:
            throw Failure()
        }
    }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// The Swift string for a validated string token.
    public static func string(_ bytes: [UInt8], _ token: JSONStringToken) -> String {
        let span = bytes.backDeployedSpan.extracting(token.contents)
        if !token.hasEscapes {
            // The bytes were validated as UTF-8 when the token was first read.
            return UTF8Validation.string(validated: span, isASCII: token.isASCII)
        }
        return unescape(span)
    }

    /// Decodes the escapes of a validated string token's contents.
    ///
    /// The contents were validated (UTF-8, escapes) and decoding an escape yields valid UTF-8 (lone
    /// surrogates become U+FFFD), so the result is built in a temporary buffer (on the stack for
    /// ordinary sizes) and copied into the string without another validation pass.
    static func unescape(_ span: Span<UInt8>) -> String {
        unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: span.count) { buffer in
            var isASCII = true
            let length = unsafe unescape(span, into: buffer, isASCII: &isASCII)
            return unsafe UTF8Validation.string(validated: buffer.span.extracting(0..<length), isASCII: isASCII)
        }
    }

    /// Writes the decoded contents into `buffer` (at least `span.count` bytes); returns the length.
    /// (Also the reference the tests hold `tether_json_unescape_validated` to, in every form.)
    static func unescape(
        _ span: Span<UInt8>,
        into buffer: UnsafeMutableBufferPointer<UInt8>,
        isASCII: inout Bool
    ) -> Int {
        var high: UInt64 = 0
        var out = 0
        var index = 0
        let count = span.count
        while index < count {
            // Copy the run up to the next backslash a word at a time. Each word is stored whole
            // (the output never runs ahead of the input, so eight bytes at `out` fit whenever
            // eight at `index` do) and the counts then advance to the backslash, if there is one.
            unsafe span.withUnsafeBufferPointer { input in
                let source = unsafe UnsafeRawPointer(input.baseAddress!)
                let target = UnsafeMutableRawPointer(buffer.baseAddress!)
                while index + 8 <= count {
                    let word = unsafe source.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                    unsafe target.storeBytes(of: word, toByteOffset: out, as: UInt64.self)
                    let flipped = UInt64(littleEndian: word) ^ 0x5C5C_5C5C_5C5C_5C5C
                    let backslashes = (flipped &- 0x0101_0101_0101_0101) & ~flipped & 0x8080_8080_8080_8080
                    if backslashes != 0 {
                        let length = backslashes.trailingZeroBitCount >> 3
                        high |= UInt64(littleEndian: word) & ((1 << UInt64(8 * length)) &- 1)
                        index += length
                        out += length
                        return
                    }
                    high |= word
                    index += 8
                    out += 8
                }
                while index < count, unsafe input[index] != UInt8(ascii: "\\") {
                    unsafe target.storeBytes(of: input[index], toByteOffset: out, as: UInt8.self)
                    high |= UInt64(unsafe input[index])
                    index += 1
                    out += 1
                }
            }
            if index == count { break }
            let letter = span[index + 1]
            index += 2
            let scalar: UInt32
            switch letter {
            case UInt8(ascii: "b"): scalar = 0x08
            case UInt8(ascii: "f"): scalar = 0x0C
            case UInt8(ascii: "n"): scalar = 0x0A
            case UInt8(ascii: "r"): scalar = 0x0D
            case UInt8(ascii: "t"): scalar = 0x09
            case UInt8(ascii: "u"):
                var unit = hex4(span, index)
                index += 4
                if unit >= 0xD800 && unit < 0xDC00, index + 6 <= count, span[index] == UInt8(ascii: "\\"),
                    span[index + 1] == UInt8(ascii: "u")
                {
                    let low = hex4(span, index + 2)
                    if low >= 0xDC00 && low < 0xE000 {
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        index += 6
                    }
                }
                scalar = (unit >= 0xD800 && unit < 0xE000) ? 0xFFFD : unit
            default: scalar = UInt32(letter)  // " \ /
            }
            // Encode the scalar as UTF-8 (escapes never yield more bytes than they take).
            if scalar >= 0x80 { high |= 0x80 }
            if scalar < 0x80 {
                unsafe buffer[out] = UInt8(scalar)
                out += 1
            } else if scalar < 0x800 {
                unsafe buffer[out] = UInt8(0xC0 | scalar >> 6)
                unsafe buffer[out + 1] = UInt8(0x80 | scalar & 0x3F)
                out += 2
            } else if scalar < 0x10000 {
                unsafe buffer[out] = UInt8(0xE0 | scalar >> 12)
                unsafe buffer[out + 1] = UInt8(0x80 | (scalar >> 6) & 0x3F)
                unsafe buffer[out + 2] = UInt8(0x80 | scalar & 0x3F)
                out += 3
            } else {
                unsafe buffer[out] = UInt8(0xF0 | scalar >> 18)
                unsafe buffer[out + 1] = UInt8(0x80 | (scalar >> 12) & 0x3F)
                unsafe buffer[out + 2] = UInt8(0x80 | (scalar >> 6) & 0x3F)
                unsafe buffer[out + 3] = UInt8(0x80 | scalar & 0x3F)
                out += 4
            }
        }
        isASCII = high & 0x8080_8080_8080_8080 == 0
        return out
    }

    /// The validated string whose opening quote is at `at` (before `end`), and the offset after
    /// its closing quote, read in one pass: plain text a word at a time up to the first escape
    /// (most strings end there) and from there decoded while the closing quote is looked for
    /// (`tether_json_unescape_validated`, in C), so that a string with escapes is not scanned
    /// twice. The decoding buffer is bounded (`fusedLimit`): a longer string is found first and
    /// then decoded. Nil if there is no string at `at`.
    static func readStringValue(_ bytes: [UInt8], _ at: Int, _ end: Int) -> (String, Int)? {
        let span = bytes.backDeployedSpan
        guard at < end, span[at] == UInt8(ascii: "\"") else { return nil }
        let start = at + 1
        let run = JSONTextScanning.endOfValidatedJSONText(in: span, from: start, to: end)
        guard run.end < end else { return nil }
        if span[run.end] == UInt8(ascii: "\"") {
            let isASCII = run.bytes & 0x8080_8080_8080_8080 == 0
            return (UTF8Validation.string(validated: span.extracting(start..<run.end), isASCII: isASCII), run.end + 1)
        }
        let limit = min(end - start, fusedLimit)
        let prefix = run.end - start
        // (16 bytes more: the C kernels copy text 16 bytes per store.)
        let fused = unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: limit + 16) {
            buffer -> (String, Int)? in
            guard prefix < limit else { return nil }
            var written = prefix
            var hasHigh: Int32 = run.bytes & 0x8080_8080_8080_8080 == 0 ? 0 : 1
            let quote = unsafe span.withUnsafeBufferPointer { input in
                unsafe buffer.baseAddress!.update(from: input.baseAddress! + start, count: prefix)
                return unsafe tether_json_unescape_validated(
                    input.baseAddress,
                    run.end,
                    start + limit,
                    buffer.baseAddress,
                    &written,
                    &hasHigh
                )
            }
            guard quote < start + limit else { return nil }
            let string = unsafe UTF8Validation.string(
                validated: buffer.span.extracting(0..<written),
                isASCII: hasHigh == 0
            )
            return (string, quote + 1)
        }
        if let fused { return fused }
        guard let (token, next) = try? readString(span, at, end, validated: true) else { return nil }
        return (string(bytes, token), next)
    }

    /// The longest stretch `readStringValue` decodes before it has found the end (bytes): small
    /// enough for the temporary buffer to stay on the stack, so that reading the strings of a
    /// large value does not allocate for each.
    static let fusedLimit = 1024

    @inline(__always)
    static func hex4(_ span: Span<UInt8>, _ index: Int) -> UInt32 {
        var value: UInt32 = 0
        for offset in 0..<4 { value = value << 4 | (hexValue(span[index + offset]) ?? 0) }
        return value
    }

    /// Whether a validated string token's contents equal `utf8` (escapes decoded when present).
    public static func stringEquals(_ bytes: [UInt8], _ token: JSONStringToken, _ utf8: Span<UInt8>) -> Bool {
        if token.hasEscapes {
            let decoded = string(bytes, token)
            return decoded.withUTF8Span { decodedUTF8 in
                guard decodedUTF8.count == utf8.count else { return false }
                for index in 0..<utf8.count where decodedUTF8[index] != utf8[index] { return false }
                return true
            }
        }
        guard token.contents.count == utf8.count else { return false }
        return utf8.isEmpty || KeySet.equalBytes(bytes.backDeployedSpan, at: token.contents.lowerBound, utf8)
    }

    // MARK: - Numbers and literals

    /// Reads a number token (RFC 8259 grammar); returns its range and whether it is an integer
    /// (no fraction, no exponent).
    public mutating func readNumber() throws(Failure) -> (range: Range<Int>, isInteger: Bool) {
        let (range, isInteger) = try Self.readNumber(bytes.backDeployedSpan, position, end)
        position = range.upperBound
        return (range, isInteger)
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    static func readNumber(
        _ span: Span<UInt8>,
        _ start: Int,
        _ end: Int
    ) throws(Failure) -> (range: Range<Int>, isInteger: Bool) {
        var index = start
        if index < end, span[index] == UInt8(ascii: "-") { index += 1 }
        guard index < end else { throw Failure() }
        if span[index] == UInt8(ascii: "0") {
            index += 1
        } else if span[index] >= UInt8(ascii: "1") && span[index] <= UInt8(ascii: "9") {
            while index < end, isDigit(span[index]) { index += 1 }
        } else {
            throw Failure()
        }
        var isInteger = true
        if index < end, span[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < end, isDigit(span[index]) { index += 1 }
            guard index > digits else { throw Failure() }
        }
        if index < end, span[index] == UInt8(ascii: "e") || span[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < end, span[index] == UInt8(ascii: "+") || span[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < end, isDigit(span[index]) { index += 1 }
            guard index > digits else { throw Failure() }
        }
        return (start..<index, isInteger)
    }

    /// The value and end of the plain integer at `start` (`-`? and at most 18 digits, no fraction
    /// or exponent: the common case, which always fits `Int64`), or nil for anything else.
    @inline(__always)
    static func plainInteger(_ span: Span<UInt8>, _ start: Int, _ end: Int) -> (Int64, Int)? {
        guard start < end else { return nil }
        var index = start
        let negative = span[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let digits = index
        var magnitude: Int64 = 0
        // Eight digits at a time where eight bytes can be read (SWAR): the digits that start the
        // word are counted, moved to its top as if zeros came first, and combined pairwise.
        while index + 8 <= end, index - digits < 16 {
            let word = unsafe span.withUnsafeBytes { unsafe $0.loadUnaligned(fromByteOffset: index, as: UInt64.self) }
            let y = UInt64(littleEndian: word) ^ 0x3030_3030_3030_3030
            let nonDigits = ((y & 0x7F7F_7F7F_7F7F_7F7F) &+ 0x7676_7676_7676_7676 | y) & 0x8080_8080_8080_8080
            let count = nonDigits == 0 ? 8 : nonDigits.trailingZeroBitCount >> 3
            guard count > 0 else { break }
            var value = y << UInt64(8 * (8 - count))
            value = (value &* 10 &+ value >> 8) & 0x00FF_00FF_00FF_00FF
            value = (value &* 100 &+ value >> 16) & 0x0000_FFFF_0000_FFFF
            value = (value &* 10000 &+ value >> 32) & 0x0000_0000_FFFF_FFFF
            magnitude = magnitude &* Self.powersOfTen[count] &+ Int64(value)
            index += count
            if count < 8 { break }
        }
        while index < end, index - digits < 18 {
            let digit = span[index] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            magnitude = magnitude &* 10 &+ Int64(digit)
            index += 1
        }
        guard index > digits else { return nil }
        if index < end {
            // A fraction, an exponent or a 19th digit: not plain.
            let next = span[index]
            if next == UInt8(ascii: ".") || next | 0x20 == UInt8(ascii: "e") || next &- UInt8(ascii: "0") < 10 {
                return nil
            }
        }
        return (negative ? -magnitude : magnitude, index)
    }

    /// 10^0 ... 10^8.
    static let powersOfTen: [Int64] = [1, 10, 100, 1000, 10000, 100_000, 1_000_000, 10_000_000, 100_000_000]

    /// The exact integer value of an integer number token, or nil if it does not fit `Int64`.
    public static func int64(_ bytes: [UInt8], _ range: Range<Int>) -> Int64? {
        let span = bytes.backDeployedSpan
        var index = range.lowerBound
        let negative = span[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        var magnitude: UInt64 = 0
        while index < range.upperBound {
            let digit = UInt64(span[index] &- UInt8(ascii: "0"))
            guard digit < 10 else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            magnitude = sum
            index += 1
        }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return .min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// The exact value of a non-negative integer number token, or nil if it does not fit `UInt64`.
    static func uint64(_ bytes: [UInt8], _ range: Range<Int>) -> UInt64? {
        let span = bytes.backDeployedSpan
        var magnitude: UInt64 = 0
        for index in range {
            let digit = UInt64(span[index] &- UInt8(ascii: "0"))
            guard digit < 10 else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            magnitude = sum
        }
        return magnitude
    }

    /// The nearest `Double` to a number token.
    static func double(_ bytes: [UInt8], _ range: Range<Int>) -> Double? {
        if range.count <= 16, let exact = int64(bytes, range), exact.magnitude < 1 << 53 { return Double(exact) }
        let text = unsafe bytes.backDeployedSpan.extracting(range).withUnsafeBufferPointer {
            unsafe String(decoding: $0, as: UTF8.self)
        }
        return Double(text)
    }

    /// Consumes the literal `word` (`true`, `false`, `null`).
    public mutating func readLiteral(_ word: StaticString) throws(Failure) {
        let length = word.utf8CodeUnitCount
        guard end - position >= length else { throw Failure() }
        var offset = 0
        while offset < length {
            let expected = unsafe word.utf8Start[offset]
            guard bytes[position + offset] == expected else { throw Failure() }
            offset += 1
        }
        position += length
    }

    /// Whether the token starting the next value is well-formed (only its first token: a
    /// container's opening bracket always is), like a streaming reader's first `Read()`.
    public func firstTokenIsValid() -> Bool {
        var copy = self
        guard let kind = copy.peekKind() else { return false }
        switch kind {
        case .object, .array: return true
        case .string: return (try? copy.readString()) != nil
        case .number: return (try? copy.readNumber()) != nil
        case .trueLiteral: return (try? copy.readLiteral("true")) != nil
        case .falseLiteral: return (try? copy.readLiteral("false")) != nil
        case .null: return (try? copy.readLiteral("null")) != nil
        }
    }

    // MARK: - Whole values

    /// Validates and skips one value (after whitespace), at most `maximumDepth` containers deep.
    public mutating func skipValue() throws(Failure) {
        if isValidated {
            position = try Self.skipValue(
                bytes.backDeployedSpan,
                position,
                end,
                depth: 0,
                maximumDepth: .max,
                validated: true
            )
        } else {
            position = try Self.validatingSkip(bytes.backDeployedSpan, position, end, maximumDepth: maximumDepth)
        }
    }

    /// `skipValue` for input not yet validated: `tether_json_skip_value` (C, `CTetherText`), one
    /// loop over the value with its open containers on a bit stack, strings a word at a time
    /// with their escapes checked in place, and one UTF-8 check of the whole value. It accepts
    /// exactly what the Swift `skipValue(validated: false)` accepts (which the tests and the fuzz
    /// target hold it to); about twice its speed on the benchmark's payloads.
    package static func validatingSkip(
        _ span: Span<UInt8>,
        _ start: Int,
        _ end: Int,
        maximumDepth: Int
    ) throws(Failure) -> Int {
        try validatingSkip(span, start, end, maximumDepth: maximumDepth, form: nil)
    }

    /// `validatingSkip` with the given form of the C kernel (nil: the one in use), for the tests
    /// and the fuzz target, which hold both forms to the Swift reference.
    static func validatingSkip(
        _ span: Span<UInt8>,
        _ start: Int,
        _ end: Int,
        maximumDepth: Int,
        form: UTF8Validation.KernelForm?
    ) throws(Failure) -> Int {
        precondition(start >= 0 && start <= end && end <= span.count, "range outside the span")
        // A container takes at least one byte, so the value's bytes bound the stack too.
        let words = min(max(maximumDepth, 0), end - start) / 64 + 1
        let depth = max(maximumDepth, 0)
        let next = unsafe withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words) { stack in
            unsafe span.withUnsafeBufferPointer { buffer in
                switch form {
                case nil:
                    unsafe tether_json_skip_value(buffer.baseAddress, start, end, depth, stack.baseAddress)
                case .some(let form):
                    unsafe tether_json_skip_value_using(
                        buffer.baseAddress,
                        start,
                        end,
                        depth,
                        stack.baseAddress,
                        Int32(form.rawValue)
                    )
                }
            }
        }
        guard next >= 0 else { throw Failure() }
        return next
    }

    /// The index of the first byte at or after `index` (before `end`) that is not JSON whitespace.
    @inline(__always)
    public static func skipWhitespace(_ span: Span<UInt8>, _ index: Int, _ end: Int) -> Int {
        var index = index
        while index < end, isWhitespace(span[index]) { index += 1 }
        return index
    }

    /// Skips one value starting at or after `at` (whitespace first); returns the offset after it.
    /// With `validated: false` it checks everything on the way; scanners use the C skip for that
    /// (`validatingSkip`), and this is the reference that the tests hold the C skip to.
    static func skipValue(
        _ span: Span<UInt8>,
        _ at: Int,
        _ end: Int,
        depth: Int,
        maximumDepth: Int,
        validated: Bool
    ) throws(Failure) -> Int {
        var index = skipWhitespace(span, at, end)
        guard index < end else { throw Failure() }
        switch span[index] {
        case UInt8(ascii: "\""):
            return try readString(span, index, end, validated: validated).1
        case UInt8(ascii: "{"):
            guard depth < maximumDepth else { throw Failure() }
            index = skipWhitespace(span, index + 1, end)
            if index < end, span[index] == UInt8(ascii: "}") { return index + 1 }
            while true {
                index = skipWhitespace(span, index, end)
                index = try readString(span, index, end, validated: validated).1
                index = skipWhitespace(span, index, end)
                guard index < end, span[index] == UInt8(ascii: ":") else { throw Failure() }
                index = try skipValue(
                    span,
                    index + 1,
                    end,
                    depth: depth + 1,
                    maximumDepth: maximumDepth,
                    validated: validated
                )
                index = skipWhitespace(span, index, end)
                guard index < end else { throw Failure() }
                if span[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard span[index] == UInt8(ascii: "}") else { throw Failure() }
                return index + 1
            }
        case UInt8(ascii: "["):
            guard depth < maximumDepth else { throw Failure() }
            index = skipWhitespace(span, index + 1, end)
            if index < end, span[index] == UInt8(ascii: "]") { return index + 1 }
            while true {
                index = try skipValue(
                    span,
                    index,
                    end,
                    depth: depth + 1,
                    maximumDepth: maximumDepth,
                    validated: validated
                )
                index = skipWhitespace(span, index, end)
                guard index < end else { throw Failure() }
                if span[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard span[index] == UInt8(ascii: "]") else { throw Failure() }
                return index + 1
            }
        case UInt8(ascii: "t"): return try literal(span, index, end, 0x74_72_75_65, 4)
        case UInt8(ascii: "f"):
            guard index + 5 <= end, span[index + 4] == UInt8(ascii: "e") else { throw Failure() }
            return try literal(span, index, end, 0x66_61_6C_73, 4) + 1
        case UInt8(ascii: "n"): return try literal(span, index, end, 0x6E_75_6C_6C, 4)
        default:
            return try readNumber(span, index, end).range.upperBound
        }
    }

    /// Checks that the `length` (≤ 4) bytes at `index` spell `expected` (big-endian packed).
    @inline(__always)
    static func literal(
        _ span: Span<UInt8>,
        _ index: Int,
        _ end: Int,
        _ expected: UInt32,
        _ length: Int
    ) throws(Failure) -> Int {
        guard index + length <= end else { throw Failure() }
        var value: UInt32 = 0
        for offset in 0..<length { value = value << 8 | UInt32(span[index + offset]) }
        guard value == expected else { throw Failure() }
        return index + length
    }

    /// Validates an array (cursor at `[`) and returns its element count; elements are checked
    /// with the depth limit counted from the array's elements.
    public mutating func skipArrayCountingElements() throws(Failure) -> Int {
        guard consume(UInt8(ascii: "[")) else { throw Failure() }
        if consume(UInt8(ascii: "]")) { return 0 }
        var count = 0
        repeat {
            try skipValue()
            count += 1
        } while consume(UInt8(ascii: ","))
        guard consume(UInt8(ascii: "]")) else { throw Failure() }
        return count
    }
}

/// The C JSON kernels checked against the Swift reference (see `agree`).
package enum JSONKernelCheck {
    /// For the fuzz target, which holds the C kernels to the Swift reference on every input:
    /// whether the C validating skip, in both forms, ends where the Swift validating skip ends
    /// (or both reject),
    /// for `span` whole and cut at `cut`; and, where `span` starts with a string the validating
    /// scan accepts, whether the validated scan (the typed readers') finds the same token.
    package static func agree(_ span: Span<UInt8>, cut: Int, maximumDepth: Int) -> Bool {
        for end in [span.count, min(max(cut, 0), span.count)] {
            let reference = try? JSONScanner.skipValue(
                span,
                0,
                end,
                depth: 0,
                maximumDepth: maximumDepth,
                validated: false
            )
            for form in UTF8Validation.runnableForms {
                let kernel = try? JSONScanner.validatingSkip(span, 0, end, maximumDepth: maximumDepth, form: form)
                guard reference == kernel else { return false }
            }
            guard let (token, next) = try? JSONScanner.readString(span, 0, end, validated: false) else { continue }
            guard let (fast, fastNext) = try? JSONScanner.readString(span, 0, end, validated: true),
                fast.contents == token.contents, fast.hasEscapes == token.hasEscapes,
                fast.isASCII == token.isASCII, fastNext == next
            else { return false }
        }
        return true
    }
}
