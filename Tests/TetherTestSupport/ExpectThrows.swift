public import Testing

/// Checks that `body` throws an `E` whose `property` (its kind, condition or code) is `expected`:
/// what a test of an error path means, rather than "some error of this type". Returns the error
/// for further checks (nil, with an issue recorded, when nothing or something else was thrown).
@discardableResult
public func expectThrows<E: Error, Value: Equatable, Result>(
    _ property: KeyPath<E, Value>,
    _ expected: Value,
    _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Result
) -> E? {
    do {
        _ = try body()
    } catch let error as E {
        #expect(
            error[keyPath: property] == expected,
            "\(error)\(comment.map { " (\($0))" } ?? "")",
            sourceLocation: sourceLocation
        )
        return error
    } catch {
        Issue.record("threw \(type(of: error)): \(error); expected \(E.self)", sourceLocation: sourceLocation)
        _ = comment
        return nil
    }
    Issue.record("nothing was thrown; expected \(E.self) with \(expected)", sourceLocation: sourceLocation)
    return nil
}

/// `expectThrows` for an async body.
@discardableResult
public func expectThrows<E: Error, Value: Equatable, Result>(
    _ property: KeyPath<E, Value>,
    _ expected: Value,
    _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Result
) async -> E? {
    do {
        _ = try await body()
    } catch let error as E {
        #expect(
            error[keyPath: property] == expected,
            "\(error)\(comment.map { " (\($0))" } ?? "")",
            sourceLocation: sourceLocation
        )
        return error
    } catch {
        Issue.record("threw \(type(of: error)): \(error); expected \(E.self)", sourceLocation: sourceLocation)
        _ = comment
        return nil
    }
    Issue.record("nothing was thrown; expected \(E.self) with \(expected)", sourceLocation: sourceLocation)
    return nil
}

extension DecodingError {
    /// Which of `DecodingError`'s cases, without its payload (for `expectThrows`).
    public enum Kind: Sendable, Equatable {
        case typeMismatch, valueNotFound, keyNotFound, dataCorrupted, other
    }

    /// The case, without its payload.
    public var kind: Kind {
        switch self {
        case .typeMismatch: .typeMismatch
        case .valueNotFound: .valueNotFound
        case .keyNotFound: .keyNotFound
        case .dataCorrupted: .dataCorrupted
        @unknown default: .other
        }
    }
}

extension EncodingError {
    /// Which of `EncodingError`'s cases, without its payload (for `expectThrows`).
    public enum Kind: Sendable, Equatable {
        case invalidValue, other
    }

    /// The case, without its payload.
    public var kind: Kind {
        switch self {
        case .invalidValue: .invalidValue
        @unknown default: .other
        }
    }
}
