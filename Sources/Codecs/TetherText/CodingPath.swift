/// A coding key for array positions, used in the coding paths of decoding errors.
@usableFromInline package struct CodingIndexKey: CodingKey, Sendable {
    /// The position in the array.
    @usableFromInline package var intValue: Int?
    /// "Index N", as Foundation's decoders spell it.
    @usableFromInline package var stringValue: String { "Index \(intValue ?? 0)" }

    /// The key for position `index`.
    @usableFromInline package init(_ index: Int) { intValue = index }
    /// Index keys have no string form to parse.
    @usableFromInline package init?(stringValue: String) { nil }
    /// The key for position `intValue`.
    @usableFromInline package init?(intValue: Int) { self.intValue = intValue }
}

/// Rebuilding coding paths on the way out of nested decoders.
///
/// Tether's decoders do not keep a coding path while decoding (that would cost an allocation per
/// nested value); instead each container prepends its key to a `DecodingError` that passes
/// through it, so the error that reaches the caller carries the full path.
@usableFromInline package enum CodingPathPrefix {
    /// `error` with `key` prepended to its coding path (errors other than `DecodingError` pass through).
    @usableFromInline package static func prefixing(_ error: any Error, with key: any CodingKey) -> any Error {
        guard let error = error as? DecodingError else { return error }
        func prefixed(_ context: DecodingError.Context) -> DecodingError.Context {
            .init(
                codingPath: [key] + context.codingPath,
                debugDescription: context.debugDescription,
                underlyingError: context.underlyingError
            )
        }
        switch error {
        case .typeMismatch(let type, let context): return DecodingError.typeMismatch(type, prefixed(context))
        case .valueNotFound(let type, let context): return DecodingError.valueNotFound(type, prefixed(context))
        case .keyNotFound(let missing, let context): return DecodingError.keyNotFound(missing, prefixed(context))
        case .dataCorrupted(let context): return DecodingError.dataCorrupted(prefixed(context))
        @unknown default: return error
        }
    }
}
