// The clients moved out of this module into their own products (so that an app links only the
// protocol it uses). An app still depending on the `TetherDispatch` product and importing
// `TetherDispatch` for them is told where they are now; importing a client module (which brings
// this one) shadows these names with the real ones.

/// Moved: `XMPPClient` is in the `TetherXMPPClient` product.
@available(
    *,
    unavailable,
    message:
        "XMPPClient is in the TetherXMPPClient product now: depend on .product(name: \"TetherXMPPClient\", package: \"tether\") and import TetherXMPPClient"
)
public enum XMPPClient {}

/// Moved: `HubConnection` is in the `TetherSignalRClient` product.
@available(
    *,
    unavailable,
    message:
        "HubConnection is in the TetherSignalRClient product now: depend on .product(name: \"TetherSignalRClient\", package: \"tether\") and import TetherSignalRClient"
)
public enum HubConnection {}

/// Moved: `HubConnectionBuilder` is in the `TetherSignalRClient` product.
@available(
    *,
    unavailable,
    message:
        "HubConnectionBuilder is in the TetherSignalRClient product now: depend on .product(name: \"TetherSignalRClient\", package: \"tether\") and import TetherSignalRClient"
)
public enum HubConnectionBuilder {}
