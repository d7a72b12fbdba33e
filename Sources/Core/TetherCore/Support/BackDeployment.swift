// Spans of standard-library storage that the platform floor (iOS 18, macOS 15, …) lacks:
// `String.UTF8View.span`, `String(copying: UTF8Span)` and `Array.span` came with the 2025
// systems. These helpers take the 2025 path where it exists (always on Linux, where availability
// checks are true) and a back-deployable one before it; `withUTF8Span` always takes the second
// (see there). `.ci/check-availability.py` keeps the
// package at its floor (Specs/platforms.md).

extension String {
    /// Calls `body` with the string's UTF-8 bytes.
    ///
    /// A string's own storage where it has one; a short string's bytes, which it holds inline,
    /// from a copy on the stack. (Not `utf8.span` of the temporary view: for inline strings, in
    /// optimized builds, `body` read garbage through that span once `XMLSerializer`'s escaping
    /// loaded it word by word; `appendAttributeValue("localhost")` wrote garbage.) The bytes are
    /// reached through `utf8.withContiguousStorageIfAvailable`, whose buffer is valid for the
    /// call (the standard library puts an inline string's bytes on the stack for it); through
    /// `withUTF8` on a copy of the string only where that has none (a bridged string): the copy
    /// and `withUTF8` cost a sixth of MessagePack's whole encoding time.
    @inlinable
    package func withUTF8Span<Result, Failure: Error>(
        _ body: (Span<UInt8>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        do {
            if let result = try unsafe utf8.withContiguousStorageIfAvailable({ buffer in
                try body(unsafe buffer.span)
            }) {
                return result
            }
        } catch {
            throw error as! Failure  // (`body` throws only `Failure`: `rethrows` erased its type)
        }
        var copy = self
        let outcome: Swift.Result<Result, Failure> = copy.withUTF8 { buffer in
            Swift.Result { () throws(Failure) -> Result in try body(unsafe buffer.span) }
        }
        return try outcome.get()
    }

    /// The string made of `bytes`, which the caller has validated as UTF-8 (all ASCII if
    /// `isASCII`; false is always safe): copied without validating again where the system can.
    @inlinable
    package init(validatedUTF8 bytes: Span<UInt8>, isASCII: Bool) {
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            self.init(copying: unsafe UTF8Span(unchecked: bytes, isKnownASCII: isASCII))
        } else {
            self = unsafe bytes.withUnsafeBufferPointer { unsafe String(decoding: $0, as: UTF8.self) }
        }
    }
}

extension Array where Element: BitwiseCopyable {
    /// The elements as a span: `Array.span` where the system has it, else the span of the whole
    /// array as a slice (`ArraySlice.span` back-deploys; the slice shares the array's storage,
    /// which the array keeps alive while the span borrows it). Only for bitwise-copyable
    /// elements: their arrays always have native storage, whereas slicing an array lazily bridged
    /// from an `NSArray` would copy into storage that the span would outlive.
    @inlinable
    package var backDeployedSpan: Span<Element> {
        @_lifetime(borrow self)
        borrowing get {
            if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
                return span
            }
            let slice = self[...]
            return unsafe _overrideLifetime(slice.span, borrowing: self)
        }
    }
}
