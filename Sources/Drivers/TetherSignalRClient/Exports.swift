// What this module's API hands out comes with it: importing `TetherSignalRClient` is enough to use it
// (the hub protocols' types and errors, the driver's options and calls, `ReconnectPolicy`, `Secret`).
@_exported public import TetherDispatch
@_exported public import TetherSignalR
