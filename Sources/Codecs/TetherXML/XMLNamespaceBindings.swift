import CExpat

/// The namespace bindings in scope while the stream parser reads (Namespaces in XML 1.0, §5):
/// every declaration on an open element, innermost last, with the prefix it binds and the index
/// of the declaration's name in the parser's shared name table (that name holds the URI). The
/// parser resolves qualified names against them: an unprefixed element name in the default
/// namespace, a prefixed name in its prefix's, an unprefixed attribute in none.
///
/// A declaration's table index stands for its namespace in the name cache's keys, so a name met
/// again under an equal declaration (the same prefix and URI, on another stanza) is found again.
@safe struct XMLNamespaceBindings: ~Copyable {
    struct Binding: BitwiseCopyable {
        /// The level of the element that declared it (the stream's root is 0).
        var level: Int32
        /// The prefix's bytes in `prefixes`; none for the default namespace.
        var prefixStart: Int32
        var prefixCount: Int32
        /// The declaration's index in the shared name table, or `XMLNameCache.noScope` where the
        /// default namespace is undeclared (`xmlns=''`).
        var scope: UInt32
    }

    private var bindings = PlainBuffer<Binding>(capacity: 8)
    private var prefixes = PlainBuffer<UInt8>(capacity: 64)
    /// The scope of unprefixed element names: the innermost default namespace declaration.
    private(set) var defaultScope = XMLNameCache.noScope
    /// The level of the innermost binding (below any level when there is none).
    private var innermostLevel = Int32.min

    var count: Int { bindings.count }

    subscript(index: Int) -> Binding {
        get { bindings[index] }
        set {
            bindings[index] = newValue
            updateDefaultScope()
        }
    }

    /// Binds the `count` bytes at `prefix` (none: the default namespace) to the declaration
    /// `scope`, for the element at `level` and its descendants.
    mutating func bind(prefix: UnsafeRawPointer, count: Int, scope: UInt32, level: Int) {
        let start = prefixes.count
        if count > 0 { unsafe prefixes.append(bytes: prefix, count: count) }
        bindings.append(
            Binding(level: Int32(level), prefixStart: Int32(start), prefixCount: Int32(count), scope: scope)
        )
        innermostLevel = Int32(level)
        if count == 0 { defaultScope = scope }
    }

    /// Ends the bindings of the element at `level` (and of any deeper one).
    @inline(__always)
    mutating func unbind(level: Int) {
        if innermostLevel >= Int32(level) { unbindInnermost(level: Int32(level)) }
    }

    private mutating func unbindInnermost(level: Int32) {
        var remaining = bindings.count
        while remaining > 0 && bindings[remaining - 1].level >= level { remaining -= 1 }
        bindings.truncate(to: remaining)
        if remaining == 0 {
            prefixes.removeAll()
            innermostLevel = Int32.min
        } else {
            let innermost = bindings[remaining - 1]
            prefixes.truncate(to: Int(innermost.prefixStart + innermost.prefixCount))
            innermostLevel = innermost.level
        }
        updateDefaultScope()
    }

    /// The declaration the `count`-byte prefix at `prefix` is bound to, or nil if none is.
    func scope(ofPrefix prefix: UnsafeRawPointer, count: Int) -> UInt32? {
        var index = bindings.count - 1
        while index >= 0 {
            let binding = bindings[index]
            if Int(binding.prefixCount) == count,
                unsafe memcmp(prefixes.address(of: Int(binding.prefixStart)), prefix, count) == 0
            {
                return binding.scope
            }
            index -= 1
        }
        return nil
    }

    mutating func removeAll() {
        bindings.removeAll()
        prefixes.removeAll()
        defaultScope = XMLNameCache.noScope
        innermostLevel = Int32.min
    }

    private mutating func updateDefaultScope() {
        var index = bindings.count - 1
        while index >= 0 {
            if bindings[index].prefixCount == 0 {
                defaultScope = bindings[index].scope
                return
            }
            index -= 1
        }
        defaultScope = XMLNameCache.noScope
    }
}
