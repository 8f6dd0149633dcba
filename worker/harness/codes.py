"""The diagnostic codes and their texts in English and Spanish (standard library only)."""

LANGUAGES = ("en", "es")

# code: (English message, English hint, Spanish message, Spanish hint). {what} names the value.
CATALOGUE: dict[str, tuple[str, str, str, str]] = {
    "missing-function": (
        "`{name}` is not defined.",
        "Define `{name}` with exactly the name and arguments of the statement, at the top level of the file (not inside another function or an `if`).",
        "`{name}` no está definida.",
        "Define `{name}` con el nombre y los argumentos exactos del enunciado, en el nivel superior del archivo (no dentro de otra función ni de un `if`).",
    ),
    "import-error": (
        "The submission could not be loaded: {error}",
        "Run the whole file (or restart the kernel and run all cells) before submitting; fix the first error shown.",
        "No se pudo cargar la entrega: {error}",
        "Ejecuta el archivo completo (o reinicia el kernel y ejecuta todas las celdas) antes de entregar; corrige el primer error que aparezca.",
    ),
    "exception": (
        "{what} raised {type}: {error}",
        "Read the line shown and test the function with small inputs of the shapes the statement gives.",
        "{what} lanzó {type}: {error}",
        "Lee la línea indicada y prueba la función con entradas pequeñas que tengan las formas que indica el enunciado.",
    ),
    "timeout": (
        "{what} did not finish within the time limit.",
        "Look for an infinite loop or work that grows too fast; the grader's inputs are small.",
        "{what} no terminó en el tiempo permitido.",
        "Busca un bucle infinito o un cálculo que crezca demasiado deprisa; las entradas del corrector son pequeñas.",
    ),
    "budget-exhausted": (
        "{what}: the time for grading this submission ({budget:g} s in all) ran out before it finished.",
        "The grader gives the whole submission {budget:g} seconds: look for sleeps, loops or work that grows too fast (the checks that ran first show which function is slow); the grader's inputs are small.",
        "{what}: el tiempo para corregir esta entrega ({budget:g} s en total) se agotó antes de que terminara.",
        "El corrector dedica {budget:g} segundos a toda la entrega: busca esperas, bucles o cálculos que crezcan demasiado deprisa (las comprobaciones que se ejecutaron primero muestran qué función es lenta); las entradas del corrector son pequeñas.",
    ),
    "memory-limit": (
        "{what} used more memory than allowed.",
        "Avoid building huge tensors or keeping every intermediate result; the grader's inputs are small.",
        "{what} usó más memoria de la permitida.",
        "Evita crear tensores enormes o guardar todos los resultados intermedios; las entradas del corrector son pequeñas.",
    ),
    "crashed": (
        "The process running your code stopped unexpectedly during {what}.",
        "Do not call exit functions or native code that can crash; run your code locally to see what happens.",
        "El proceso que ejecuta tu código se detuvo inesperadamente durante {what}.",
        "No llames a funciones que terminen el proceso ni a código nativo que pueda fallar; ejecuta tu código en tu ordenador para ver qué ocurre.",
    ),
    "forbidden-operation": (
        "{what} tried something the grader does not allow: {error}",
        "Exercises need no network, subprocesses or files outside the temporary directory.",
        "{what} intentó algo que el corrector no permite: {error}",
        "Los ejercicios no necesitan acceso a la red, subprocesos ni archivos fuera del directorio temporal.",
    ),
    "output-mismatch": (
        "{what} has wrong values (max abs error {max_abs_error:.3g}, max rel error {max_rel_error:.3g}; at index {worst_index}: got {got}, expected {expected}).",
        "Check the formula on a small example by hand, and the dimension each reduction runs over.",
        "{what} tiene valores incorrectos (error absoluto máximo {max_abs_error:.3g}, error relativo máximo {max_rel_error:.3g}; en el índice {worst_index} se obtuvo {got} y se esperaba {expected}).",
        "Comprueba la fórmula a mano con un ejemplo pequeño y revisa sobre qué dimensión actúa cada reducción.",
    ),
    "shape-mismatch": (
        "{what} has shape {got}, expected {expected}.",
        "Print `.shape` after each step; check which dimension `reshape`, `unsqueeze`, `transpose` or `cat` act on.",
        "{what} tiene forma {got}, se esperaba {expected}.",
        "Imprime `.shape` tras cada paso; comprueba sobre qué dimensión actúan `reshape`, `unsqueeze`, `transpose` o `cat`.",
    ),
    "dtype-mismatch": (
        "{what} has dtype {got}, expected {expected}.",
        "Pass `dtype=` when creating the tensor, or convert with `.to(dtype)`.",
        "{what} tiene dtype {got}, se esperaba {expected}.",
        "Indica `dtype=` al crear el tensor o conviértelo con `.to(dtype)`.",
    ),
    "device-mismatch": (
        "{what} is on {got}, expected {expected}.",
        "Create new tensors on the input's device (`device=x.device`) instead of the default CPU.",
        "{what} está en {got}, se esperaba {expected}.",
        "Crea los tensores nuevos en el dispositivo de la entrada (`device=x.device`) en lugar de en la CPU, que es el dispositivo por defecto.",
    ),
    "detached-output": (
        "{what} is not connected to the autograd graph (no grad_fn).",
        "Nothing computed under `torch.no_grad()` (or `torch.inference_mode()`), nor through `.detach()`, `.data`, `.item()`, `.numpy()` or `torch.tensor(x)`, is recorded in the graph: compute the values you differentiate with tensor operations, outside those blocks.",
        "{what} no está conectado al grafo de autograd (no tiene grad_fn).",
        "Nada de lo que se calcula bajo `torch.no_grad()` (o `torch.inference_mode()`), ni a través de `.detach()`, `.data`, `.item()`, `.numpy()` o `torch.tensor(x)`, queda en el grafo: calcula los valores que hay que derivar con operaciones de tensores, fuera de esos bloques.",
    ),
    "grad-none": (
        "{what} is None: no gradient reached it.",
        "Make sure the tensor requires grad, is used in the computation, and that `backward()` runs before you read `.grad` (intermediates need `retain_grad()`).",
        "{what} es None: no le llegó ningún gradiente.",
        "Asegúrate de que el tensor tiene `requires_grad=True`, de que se usa en el cálculo y de que `backward()` se ejecuta antes de leer `.grad` (los tensores intermedios necesitan `retain_grad()`).",
    ),
    "grad-mismatch": (
        "{what} has wrong values (max abs error {max_abs_error:.3g}, max rel error {max_rel_error:.3g}; at index {worst_index}: got {got}, expected {expected}).",
        "Derive the gradient by hand for one element and compare; check what `backward` is called on and with which `gradient=`.",
        "{what} tiene valores incorrectos (error absoluto máximo {max_abs_error:.3g}, error relativo máximo {max_rel_error:.3g}; en el índice {worst_index} se obtuvo {got} y se esperaba {expected}).",
        "Deriva a mano el gradiente de un elemento y compáralo; comprueba sobre qué tensor llamas a `backward` y con qué `gradient=`.",
    ),
    "grad-scaled": (
        "{what} is {factor:.4g} times the expected gradient.",
        "Every element is off by this same factor, so the direction is right: look for a constant that multiplies or divides what reaches the gradient (a mean where a sum is meant or the reverse, a division by another count, a scaled `gradient=`).",
        "{what} es {factor:.4g} veces el gradiente esperado.",
        "Todos los elementos difieren en este mismo factor, así que la dirección es correcta: busca una constante que multiplique o divida lo que llega al gradiente (una media donde va una suma o al revés, una división entre otra cantidad, un `gradient=` escalado).",
    ),
    "grad-accumulated": (
        "{what} is {factor:g} times the expected gradient: what {factor:g} backward passes added up would give.",
        "`.grad` accumulates across `backward()` calls: if yours runs more than once, clear it once it has been used (`optimizer.zero_grad()` after each step, or `w.grad = None` after a manual update); if it runs once, a constant factor in the formula is off.",
        "{what} es {factor:g} veces el gradiente esperado: lo que darían {factor:g} pasadas de backward sumadas.",
        "`.grad` se acumula entre llamadas a `backward()`: si la tuya se ejecuta más de una vez, bórralo en cuanto se haya usado (`optimizer.zero_grad()` tras cada paso, o `w.grad = None` tras una actualización manual); si se ejecuta una sola vez, falla un factor constante de la fórmula.",
    ),
    "grad-sign-flipped": (
        "{what} has the opposite sign of the expected gradient.",
        "Check the sign of each term in your formula (a − that became +, or a derivative returned with the wrong sign).",
        "{what} tiene el signo contrario al del gradiente esperado.",
        "Revisa el signo de cada término de la fórmula (un − que se convirtió en +, o una derivada devuelta con el signo cambiado).",
    ),
    "grad-nonfinite": (
        "{what} contains NaN or Inf.",
        "Look for divisions by zero, `log` of non-positive values or overflowing exponentials.",
        "{what} contiene NaN o Inf.",
        "Busca divisiones por cero, `log` de valores no positivos o exponenciales que se desbordan.",
    ),
    "inplace-modified": (
        "{what}: a tensor needed for the backward pass was modified in place.",
        "Replace in-place operations (`x += ...`, `x.relu_()`, `x[i] = ...`) on tensors autograd saved by out-of-place ones.",
        "{what}: se modificó «in situ» un tensor que autograd necesitaba para el paso hacia atrás.",
        "Sustituye las operaciones «in situ» (`x += ...`, `x.relu_()`, `x[i] = ...`) sobre tensores que autograd ha guardado por otras que creen un tensor nuevo.",
    ),
    "nonscalar-backward": (
        "{what} called `backward()` on a non-scalar tensor without `gradient=`.",
        "For a non-scalar output Q, call `Q.backward(gradient=v)` with a tensor v of Q's shape.",
        "{what} llamó a `backward()` sobre un tensor no escalar sin `gradient=`.",
        "Para una salida Q no escalar, llama a `Q.backward(gradient=v)` con un tensor v de la misma forma que Q.",
    ),
    "graph-freed": (
        "{what} ran backward through the same graph twice.",
        "Recompute the forward pass before each backward, or pass `retain_graph=True` to the first one if you really need both.",
        "{what} ejecutó backward dos veces sobre el mismo grafo.",
        "Recalcula el paso hacia delante antes de cada backward, o pasa `retain_graph=True` al primero si de verdad necesitas ambos.",
    ),
    "custom-backward-mismatch": (
        "{what}: your Function's backward disagrees with finite differences of its forward (max abs error {max_abs_error:.3g}).",
        "Differentiate your forward by hand (product rule!) and check that backward multiplies by `grad_output`.",
        "{what}: el backward de tu Function no coincide con las diferencias finitas de su forward (error absoluto máximo {max_abs_error:.3g}).",
        "Deriva tu forward a mano (¡regla del producto!) y comprueba que backward multiplica por `grad_output`.",
    ),
    "custom-function-unused": (
        "{what}: the output's grad_fn is {got}, not your Function.",
        "Return `YourFunction.apply(x)`; calling the operations directly bypasses your backward.",
        "{what}: el grad_fn de la salida es {got}, no tu Function.",
        "Devuelve `TuFunction.apply(x)`: si llamas directamente a las operaciones, tu backward no se usa.",
    ),
    "requires-grad-wrong": (
        "{what}: requires_grad is {got}, expected {expected}.",
        "Check which tensors must be trained and which not: `requires_grad_(False)` and `detach()` switch tracking off, and layers created after freezing are trainable by default.",
        "{what}: requires_grad es {got}, se esperaba {expected}.",
        "Comprueba qué tensores deben entrenarse y cuáles no: `requires_grad_(False)` y `detach()` desactivan el seguimiento, y las capas creadas después de congelar son entrenables por defecto.",
    ),
    "frozen-param-changed": (
        "{what} changed after an optimizer step although it should be frozen.",
        "`.eval()` does not freeze parameters: set `requires_grad = False` on them.",
        "{what} cambió tras un paso del optimizador aunque debía estar congelado.",
        "`.eval()` no congela los parámetros: ponles `requires_grad = False`.",
    ),
    "leaf-replaced": (
        "{what} was rebound to {got}, a new tensor: the leaf tensor it named was not updated in place.",
        "Update parameters in place under `torch.no_grad()` (`w -= lr * w.grad`): `w = w - lr * w.grad` makes a new tensor and only rebinds the name, so the caller (or the optimizer) keeps the old, unchanged leaf.",
        "{what} se reasignó a {got}, un tensor nuevo: el tensor hoja al que se refería no se actualizó «in situ».",
        "Actualiza los parámetros «in situ» dentro de `torch.no_grad()` (`w -= lr * w.grad`): `w = w - lr * w.grad` crea un tensor nuevo y solo reasigna el nombre, así que quien llama (o el optimizador) conserva la hoja antigua sin cambios.",
    ),
    "tracked-in-inference": (
        "{what} still requires grad (grad_fn {got}) in inference.",
        "Wrap inference in `torch.no_grad()` (or `torch.inference_mode()`) and call `model.eval()`.",
        "{what} sigue registrando operaciones para el gradiente (grad_fn {got}) durante la inferencia.",
        "Haz la inferencia dentro de `torch.no_grad()` (o `torch.inference_mode()`) y llama a `model.eval()`.",
    ),
    "storage-not-shared": (
        "{what} does not share memory with the input.",
        "Use a view (`view`, `reshape` on contiguous input, `detach`, `torch.from_numpy`) instead of a copy (`clone`, `torch.tensor`).",
        "{what} no comparte memoria con la entrada.",
        "Usa una vista (`view`, `reshape` sobre una entrada contigua, `detach`, `torch.from_numpy`) en lugar de una copia (`clone`, `torch.tensor`).",
    ),
    "storage-shared": (
        "{what} shares memory with the input, but must be an independent copy.",
        "Use `.clone()` so changes to one do not show in the other.",
        "{what} comparte memoria con la entrada, pero debe ser una copia independiente.",
        "Usa `.clone()` para que los cambios en uno no aparezcan en el otro.",
    ),
    "memory-format-wrong": (
        "{what} is not in channels_last memory format.",
        "Use `x.to(memory_format=torch.channels_last)`: same shape, different strides.",
        "{what} no está en formato de memoria channels_last.",
        "Usa `x.to(memory_format=torch.channels_last)`: misma forma, distintos pasos (strides).",
    ),
    "nondeterministic": (
        "{what} gave different results for the same input.",
        "Do not use randomness or global state that changes between calls.",
        "{what} dio resultados distintos para la misma entrada.",
        "No uses aleatoriedad ni estado global que cambie entre llamadas.",
    ),
    "temp-file-leak": (
        "{what} did not delete the files it wrote in the temporary directory (files left: {count}).",
        "Delete each file once it has been loaded back (in the unpack hook or when its owner is freed).",
        "{what} no borró los archivos que escribió en el directorio temporal (archivos que quedaron: {count}).",
        "Borra cada archivo en cuanto lo hayas vuelto a cargar (en el hook de unpack o cuando se libere su propietario).",
    ),
}

# Hints (a diagnostic's `hint` detail) for mistakes that a code alone does not name.
GRAD_CLEARED = {
    "en": "{what} is all zeros. Most often the gradient was cleared (`.zero_()`, `zero_grad()`) "
    "after `backward()` and before it was read or used: use `.grad` first, then clear it. "
    "Otherwise check that the value really depends on that tensor (no `round`, `argmax` or "
    "comparison on the way).",
    "es": "{what} es todo ceros. Lo más frecuente es que el gradiente se borrara (`.zero_()`, "
    "`zero_grad()`) después de `backward()` y antes de leerlo o usarlo: usa primero "
    "`.grad` y bórralo después. Si no, comprueba que el valor dependa de verdad de ese "
    "tensor (sin `round`, `argmax` ni comparaciones por el camino).",
}
LEAF_IN_PLACE = {
    "en": "An in-place operation (`w -= …`, `w.add_(…)`, `w[i] = …`) on a leaf that requires grad "
    "is refused by autograd: a parameter update goes inside `with torch.no_grad():`; in the "
    "computation you differentiate, use an operation that makes a new tensor (`y = w - …`).",
    "es": "Autograd rechaza una operación «in situ» (`w -= …`, `w.add_(…)`, `w[i] = …`) sobre una "
    "hoja que requiere gradiente: una actualización de parámetros va dentro de "
    "`with torch.no_grad():`; en el cálculo que derivas, usa una operación que cree un "
    "tensor nuevo (`y = w - …`).",
}
# PyTorch's own errors of this course, said in its terms (PyTorch's advice can mislead: "use
# tensor.detach().numpy()" takes a student who left the graph further from it)
NUMPY_LEAVES_THE_GRAPH = {
    "en": "`.numpy()` on a tensor that requires grad: the computation left PyTorch for NumPy, "
    "where autograd cannot follow it, so no gradient can flow back. Do not `.detach()` it "
    "as PyTorch suggests (the gradient would be lost all the same): write that part with "
    "torch operations (`torch.exp`, `@`, `.sum()`…).",
    "es": "`.numpy()` sobre un tensor que requiere gradiente: el cálculo salió de PyTorch hacia "
    "NumPy, donde autograd no puede seguirlo, así que ningún gradiente puede volver. No lo "
    "arregles con `.detach()` como sugiere PyTorch (el gradiente se perdería igual): "
    "escribe esa parte con operaciones de torch (`torch.exp`, `@`, `.sum()`…).",
}
ONE_ELEMENT_ONLY = {
    "en": "`.item()`, `float()` and `int()` take a tensor of one element, and this one has "
    "several: reduce it first (`.sum()`, `.mean()`), or keep the tensor (a number leaves "
    "the autograd graph).",
    "es": "`.item()`, `float()` e `int()` admiten un tensor de un solo elemento y este tiene "
    "varios: redúcelo antes (`.sum()`, `.mean()`), o quédate con el tensor (un número sale "
    "del grafo de autograd).",
}
EINSUM_SUBSCRIPTS = {
    "en": "The einsum equation gives each operand one letter per dimension, in order: count the "
    "letters before each comma against that tensor's `.dim()`, and give dimensions that "
    "meet the same letter only where their sizes agree.",
    "es": "La ecuación de einsum da a cada operando una letra por dimensión, en orden: cuenta las "
    "letras antes de cada coma frente al `.dim()` de ese tensor, y repite una letra solo en "
    "dimensiones del mismo tamaño.",
}
PERMUTE_DIMENSIONS = {
    "en": "`permute` names every dimension of the tensor once: as many numbers as `x.dim()` (an "
    "input of another rank than you assumed? the statement says which ranks come).",
    "es": "`permute` nombra cada dimensión del tensor una vez: tantos números como `x.dim()` "
    "(¿una entrada de otro rango del que suponías? el enunciado dice qué rangos llegan).",
}
VIEW_SIZE = {
    "en": "The new shape must hold exactly as many elements as the tensor (`x.numel()`): compute "
    "its sizes from `x.shape`, or let one be `-1`, rather than fixing numbers.",
    "es": "La forma nueva debe tener exactamente tantos elementos como el tensor (`x.numel()`): "
    "calcula sus tamaños a partir de `x.shape`, o deja uno en `-1`, en vez de fijar números.",
}
VIEW_STRIDES = {
    "en": "`view` only regroups a tensor whose elements lie in memory in the new order; after "
    "`permute`, `transpose` or `.T` they do not. `reshape` (which copies when it must), or "
    "`.contiguous().view(...)`.",
    "es": "`view` solo reagrupa un tensor cuyos elementos están en memoria en el orden nuevo; "
    "después de `permute`, `transpose` o `.T` no lo están. Usa `reshape` (que copia cuando "
    "hace falta) o `.contiguous().view(...)`.",
}
SAME_DEVICE = {
    "en": "Tensors of one operation must be on one device: the grader may run your code on a "
    "GPU, so make new tensors where the inputs are (`torch.zeros(n, device=x.device)`, "
    "`torch.zeros_like(x)`), never on a fixed device.",
    "es": "Los tensores de una operación deben estar en el mismo dispositivo: el corrector puede "
    "ejecutar tu código en una GPU, así que crea los tensores nuevos donde están las "
    "entradas (`torch.zeros(n, device=x.device)`, `torch.zeros_like(x)`), nunca en uno fijo.",
}
SAME_DTYPE = {
    "en": "The tensors of one operation must share a dtype: make new ones with the inputs' "
    "(`dtype=x.dtype`, `torch.zeros_like(x)`); `torch.tensor([...])` of Python floats is "
    "float32 whatever the inputs are.",
    "es": "Los tensores de una operación deben tener el mismo dtype: crea los nuevos con el de las "
    "entradas (`dtype=x.dtype`, `torch.zeros_like(x)`); `torch.tensor([...])` con floats de "
    "Python es float32 sean como sean las entradas.",
}
# `detached-output` raised by backward() itself: the subject and the two ways to get there
BACKWARD_ON = {
    "en": "the tensor that `backward()` ran on in {what}",
    "es": "el tensor sobre el que se ejecutó `backward()` en {what}",
}
DETACHED_BACKWARD = {
    "en": "Either the computation left the graph (under `torch.no_grad()` or "
    "`torch.inference_mode()`, or through `.detach()`, `.data`, `.item()`, `.numpy()`, "
    "`torch.tensor(...)`): keep it in tensor operations, outside those blocks; or none of "
    "its inputs requires grad (frozen parameters, `requires_grad=False`).",
    "es": "O bien el cálculo salió del grafo (bajo `torch.no_grad()` o "
    "`torch.inference_mode()`, o a través de `.detach()`, `.data`, `.item()`, `.numpy()`, "
    "`torch.tensor(...)`): hazlo todo con operaciones de tensores, fuera de esos bloques; o "
    "bien ninguna de sus entradas requiere gradiente (parámetros congelados, "
    "`requires_grad=False`).",
}

# Messages for a value of the wrong kind altogether (a tensor instead of a float, say).
WRONG_TYPE = (
    "{what} is a {got_type}, expected {expected_type}.",
    "Return exactly what the statement asks for: for a Python number use `.item()`; for a tensor, a plain `torch.Tensor`.",
    "{what} es de tipo {got_type}, se esperaba {expected_type}.",
    "Devuelve exactamente lo que pide el enunciado: para un número de Python usa `.item()`; para un tensor, un `torch.Tensor` normal.",
)

# grad-accumulated seen as a pattern (running sums of rows) rather than as a factor
ACCUMULATED_PATTERN = (
    "{what} adds up the gradients of several `backward()` calls.",
    CATALOGUE["grad-accumulated"][1],
    "{what} suma los gradientes de varias llamadas a `backward()`.",
    CATALOGUE["grad-accumulated"][3],
)

# Messages for a single wrong number (no index to point at).
WRONG_NUMBER = (
    "{what} is {got}, expected {expected}.",
    "Check the formula on a small example by hand, and the dimension each reduction runs over.",
    "{what} es {got}, se esperaba {expected}.",
    "Comprueba la fórmula a mano con un ejemplo pequeño y revisa sobre qué dimensión actúa cada reducción.",
)


def said_elsewhere(details: dict) -> bool:
    """A diagnostic that points at an earlier check's explanation instead of giving its own."""
    return "same_as" in details or "follows" in details
