import CExpat
@_spi(TetherInternal) public import TetherCore

/// An incremental parser for an endless XML stream (an XMPP stream), built on the system Expat.
///
/// Feed it bytes in any chunking with `append(_:)` and pull events with `next()`: the stream
/// header, each complete depth-1 element as an `XElement` tree, and the stream's end. The
/// parser reads what it was given in one pass and hands the events out one at a time (at most
/// `maximumEventsAhead` wait; Expat is suspended until they are taken). A stream restart happens at the exact
/// byte where the last event handed out ended: `restart()` resets Expat (never from inside a
/// callback) and returns the bytes that followed, which belong to the next stream (after SASL
/// `<success/>`) or to TLS (after `<proceed/>`); whatever the parser read ahead of them in the old
/// stream's context, events and errors alike, is dropped with it. After the stream's end
/// (`.streamClose`, which follows the `.streamOpen` of an empty root too) nothing more is
/// parsed or taken: the peer closes the connection next (RFC 6120 §4.4).
///
/// Everything RFC 6120 §11 restricts is an error: comments, processing instructions, DTDs,
/// entity declarations and references to undeclared entities (`restricted-xml`); anything not
/// well-formed, including invalid UTF-8 and unbound prefixes (`not-well-formed`); a byte-order
/// mark or an encoding other than UTF-8 (`unsupported-encoding`). Limits (element size counted in
/// raw bytes and enforced while the element arrives, depth, attributes, children) are
/// `policy-violation`s. After an error every call throws it again.
///
/// Expat's reparse deferral (Expat 2.6, and Debian 12's patched 2.5.0 packages) is switched off
/// on every parser and after every reset, so each event is reported as soon as its last byte has
/// been fed, even when the stream arrives one byte at a time.
@safe public struct XMLStreamParser: ~Copyable {
    /// Limits, each a `policy-violation` when exceeded.
    public struct Configuration: Sendable {
        /// The largest top-level element, in raw bytes (default 256 KiB, prosody's
        /// `c2s_stanza_size_limit`). Bytes between elements count too, so a peer cannot make the
        /// parser buffer more than this.
        public var maximumElementSize: Int
        /// The deepest nesting inside a top-level element, counting it as 1 (default 64).
        public var maximumDepth: Int
        /// The most attributes on one element, namespace declarations included (default 64).
        public var maximumAttributes: Int
        /// The most elements in one top-level element, counting it (default 25,000, prosody's
        /// `c2s_max_child_elements`).
        public var maximumElements: Int
        /// The most slots of the parser's name cache (default 512, rounded up to a power of two;
        /// about 80 bytes each with their key space and names, so at most 40 KiB by default).
        /// The cache starts with 32 slots and doubles as names arrive. At most half of the slots
        /// hold a name at a time, with 32 bytes of key space per slot (longer names than 512
        /// bytes are not cached); when either runs out at full size the cache starts again, so a
        /// peer inventing new names costs bounded memory and only the time to build those names.
        public var nameCacheCapacity: Int
        /// The most events parsed ahead of `next()` (default 256, at least 1): when that many
        /// wait, Expat is suspended until they are taken. It bounds the trees one read of many
        /// small stanzas makes at once; reading many at a time saves a suspension per stanza.
        public var maximumEventsAhead: Int

        /// Creates a configuration.
        public init(
            maximumElementSize: Int = 256 * 1024,
            maximumDepth: Int = 64,
            maximumAttributes: Int = 64,
            maximumElements: Int = 25_000,
            nameCacheCapacity: Int = 512,
            maximumEventsAhead: Int = 256
        ) {
            self.maximumElementSize = maximumElementSize
            self.maximumDepth = maximumDepth
            self.maximumAttributes = maximumAttributes
            self.maximumElements = maximumElements
            self.nameCacheCapacity = nameCacheCapacity
            self.maximumEventsAhead = maximumEventsAhead
        }
    }

    /// How this process's Expat handles reparse deferral.
    public enum ReparseDeferral: Sendable, Equatable {
        /// The library has no reparse deferral (Expat before 2.6, Debian 12 deb12u1).
        case absent
        /// The library defers reparsing by default and the parser switched it off.
        case disabled
        /// Switching it off failed (events may then be reported late).
        case couldNotDisable
    }

    /// Expat and the state its callbacks work on; nil while the buffers are released
    /// (`releaseBuffersWhileIdle()`). The state lives behind a pointer this struct owns
    /// (allocated with Expat, freed with it) rather than in a class, so that the callbacks' many
    /// accesses are not checked for exclusivity at run time. Expat is never called from inside an
    /// access to it, and callbacks only run inside Expat.
    private var core: Core?
    /// While released: the stream header to replay to a fresh Expat before the next bytes (the
    /// root element with its namespace declarations, so that stanzas parse in the same scope).
    private var releasedHeader: [UInt8]?
    private let configuration: Configuration

    @safe private struct Core {
        let parser: XML_Parser
        let state: UnsafeMutablePointer<XMLStreamParserState>
    }

    /// What happened to reparse deferral on this parser.
    public private(set) var reparseDeferral: ReparseDeferral

    /// A parser at the start of a stream.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        reparseDeferral = .absent
        let (core, deferral) = Self.makeCore(configuration)
        self.core = core
        reparseDeferral = deferral
    }

    private static func makeCore(_ configuration: Configuration) -> (Core, ReparseDeferral) {
        // Without Expat's namespace processing: the parser state resolves qualified names itself
        // (`XMLNamespaceBindings`), keyed by the names as written, which is cheaper than Expat
        // building each name's URI-qualified form.
        guard let parser = unsafe XML_ParserCreate("UTF-8") else {
            fatalError("Expat could not allocate a parser (out of memory)")
        }
        let state = UnsafeMutablePointer<XMLStreamParserState>.allocate(capacity: 1)
        unsafe state.initialize(to: XMLStreamParserState(configuration: configuration, parser: parser))
        let deferral = unsafe Self.configure(parser, state)
        return (unsafe Core(parser: parser, state: state), deferral)
    }

    private static func free(_ core: Core) {
        unsafe XML_ParserFree(core.parser)
        unsafe core.state.deinitialize(count: 1)
        unsafe core.state.deallocate()
    }

    deinit {
        if let core = core { Self.free(core) }
    }

    /// Expat and its state, recreated first if the buffers were released.
    private mutating func active() -> Core {
        if let core = core { return core }
        let (core, deferral) = Self.makeCore(configuration)
        self.core = core
        reparseDeferral = deferral
        if let header = releasedHeader {
            releasedHeader = nil
            // Replay the header; its event is the stream's, already reported once.
            unsafe core.state.pointee.pending = header
            _ = try? next()
        }
        return core
    }

    /// Frees Expat and the parser's buffers while the stream is idle: after the stream header,
    /// between two top-level elements, with no partial element buffered, no error and no event
    /// waiting. The next `append` recreates them (replaying the stream header, so namespace
    /// prefixes declared there keep working). Returns whether it released anything. A connection
    /// that idles for a while calls it to shrink from tens of kilobytes to almost nothing.
    @discardableResult
    public mutating func releaseBuffersWhileIdle() -> Bool {
        guard let core = core, let header = unsafe core.state.pointee.replayableHeader(),
            unsafe core.state.pointee.isIdle
        else { return false }
        Self.free(core)
        self.core = nil
        releasedHeader = header
        return true
    }

    /// Whether the buffers are released (see `releaseBuffersWhileIdle()`).
    public var buffersReleased: Bool { core == nil }

    /// Registers the handlers and settings (again after every reset, which clears them).
    private static func configure(
        _ parser: XML_Parser,
        _ state: UnsafeMutablePointer<XMLStreamParserState>
    ) -> ReparseDeferral {
        unsafe XML_SetUserData(parser, UnsafeMutableRawPointer(state))
        unsafe XML_SetElementHandler(parser, xmlStartElement, xmlEndElement)
        unsafe XML_SetCharacterDataHandler(parser, xmlCharacters)
        unsafe XML_SetXmlDeclHandler(parser, xmlDeclaration)
        unsafe XML_SetCommentHandler(parser, xmlComment)
        unsafe XML_SetProcessingInstructionHandler(parser, xmlProcessingInstruction)
        unsafe XML_SetStartDoctypeDeclHandler(parser, xmlDoctype)
        unsafe XML_SetEntityDeclHandler(parser, xmlEntityDeclaration)
        // A second line of defence should a DTD ever get through.
        _ = unsafe XML_SetBillionLaughsAttackProtectionMaximumAmplification(parser, 100.0)
        _ = unsafe XML_SetBillionLaughsAttackProtectionActivationThreshold(parser, 8 << 20)
        switch unsafe cexpat_disable_reparse_deferral(parser) {
        case 1: return .disabled
        case 0: return .couldNotDisable
        default: return .absent
        }
    }

    /// Adds received bytes (copied; parsed by the following `next()` calls).
    public mutating func append(_ bytes: Span<UInt8>) {
        guard !bytes.isEmpty else { return }
        let state = unsafe active().state
        guard unsafe state.pointee.failure == nil, unsafe !state.pointee.ended else { return }
        unsafe state.pointee.pending.append(copying: bytes)
    }

    /// Adds received bytes (copied).
    public mutating func append(_ bytes: [UInt8]) {
        append(bytes.backDeployedSpan)
    }

    /// Adds received bytes (copied; a slice of a capture, say).
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        append(bytes.span)
    }

    /// Whether received bytes are waiting that have not produced an event yet (a partial element).
    public var hasPendingBytes: Bool {
        guard let core = core else { return false }
        return unsafe core.state.pointee.hasPendingBytes
    }

    /// The next event, or nil if more bytes are needed.
    public mutating func next() throws(XMLStreamError) -> XMLStreamEvent? {
        guard let core = core else { return nil }
        let parser = unsafe core.parser
        let state = unsafe core.state
        while true {
            if let event = unsafe state.pointee.takeEvent() { return event }
            if let failure = unsafe state.pointee.failure { throw failure }
            // Nothing after the stream's closing tag is parsed.
            if unsafe state.pointee.ended { return nil }
            let status: XML_Status
            if unsafe state.pointee.suspended {
                status = unsafe XML_ResumeParser(parser)
            } else if unsafe state.pointee.canFeed {
                status = unsafe Self.feedPending(parser, state)
            } else {
                return nil
            }
            unsafe state.pointee.parsed(status)
        }
    }

    /// Feeds every pending byte to Expat.
    private static func feedPending(
        _ parser: XML_Parser,
        _ state: UnsafeMutablePointer<XMLStreamParserState>
    ) -> XML_Status {
        guard unsafe state.pointee.takePending() else { return XML_STATUS_ERROR }
        // A copy of the array reference: the callbacks run during the call and must not overlap
        // an access to the state.
        let chunk = unsafe state.pointee.chunk
        return unsafe chunk.withUnsafeBufferPointer { buffer in
            unsafe XML_Parse(
                parser,
                UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(buffer.count),
                0
            )
        }
    }

    /// Resets the parser for a new stream (after SASL success or STARTTLS) and returns the bytes
    /// received after the last event `next()` returned (those the parser read ahead included).
    ///
    /// Call it right after the event that ends the old stream's life (`<success/>`,
    /// `<proceed/>`); after `<success/>` append the returned bytes again, after `<proceed/>` they
    /// are TLS records.
    public mutating func restart() -> [UInt8] {
        guard let core = core else {
            // Released while idle: nothing is buffered; the next bytes start a fresh stream.
            releasedHeader = nil
            return []
        }
        let remainder = unsafe core.state.pointee.unconsumedBytes()
        _ = unsafe XML_ParserReset(core.parser, "UTF-8")
        unsafe core.state.pointee.reset()
        reparseDeferral = unsafe Self.configure(core.parser, core.state)
        return remainder
    }

    /// The stream error for an Expat error code.
    static func error(for code: XML_Error) -> XMLStreamError {
        let message = unsafe XML_ErrorString(code).map { unsafe String(cString: $0) } ?? "error \(code.rawValue)"
        switch code {
        case XML_ERROR_UNDEFINED_ENTITY, XML_ERROR_RECURSIVE_ENTITY_REF, XML_ERROR_PARAM_ENTITY_REF,
            XML_ERROR_ASYNC_ENTITY, XML_ERROR_BINARY_ENTITY_REF, XML_ERROR_ATTRIBUTE_EXTERNAL_ENTITY_REF,
            XML_ERROR_EXTERNAL_ENTITY_HANDLING, XML_ERROR_ENTITY_DECLARED_IN_PE, XML_ERROR_AMPLIFICATION_LIMIT_BREACH:
            return .init(.restrictedXML, message)
        case XML_ERROR_UNKNOWN_ENCODING, XML_ERROR_INCORRECT_ENCODING:
            return .init(.unsupportedEncoding, message)
        default:
            return .init(.notWellFormed, message)
        }
    }
}
