#include <assert.h>
int main(void){assert(1);return 0;}
